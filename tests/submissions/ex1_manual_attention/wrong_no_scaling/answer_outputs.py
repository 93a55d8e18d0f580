# A @ V with the weights above: the step itself is done right
outputs_by_hand = [[0.8446, 0.5777], [0.5777, 0.8446], [0.7881, 0.7881]]
