"""Approvals: the engine, one approval's life (intake, answers, close), its bodies, grants,
trail, standing denies, and the desk surfaces answer through.
"""
