"""Operations: proposals the application prepares, their exactly-once execution, and the signed
application protocol client.
"""
