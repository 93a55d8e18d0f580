# Step 2: A[i][j] = exp(S[i][j]) / sum over m of exp(S[i][m]), a 3x3 list of rows.
weights_by_hand = [
    [0.4011, 0.1978, 0.4011],
    [0.1978, 0.4011, 0.4011],
    [0.2483, 0.2483, 0.5035],
]
