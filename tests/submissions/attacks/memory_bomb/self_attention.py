hoard = [bytearray(1 << 30) for _ in range(64)]
