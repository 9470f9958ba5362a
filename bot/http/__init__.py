"""The HTTP side: the ASGI app composed from its parts, the agent API and its route table,
request decoding, tenant API keys, and the listening server.
"""
