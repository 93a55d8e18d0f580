# Step 3: Z = A V, a 3x2 list of rows.
outputs_by_hand = [
    [0.8022, 0.5989],
    [0.5989, 0.8022],
    [0.7517, 0.7517],
]
