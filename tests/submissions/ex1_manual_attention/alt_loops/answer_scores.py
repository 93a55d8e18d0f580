# Python as a calculator: every dot product, divided by sqrt(2)
scores_by_hand = np.array([[1, 0, 1], [0, 1, 1], [1, 1, 2]]) / np.sqrt(2)
