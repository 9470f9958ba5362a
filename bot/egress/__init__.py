"""Egress: where outbound requests may go (URL and address checks) and the pinned client they
leave through.
"""
