"""The papers' network experiments, built on the Torch backend (:mod:`sgsim.torch`).

Each module is one experiment with its own command line and checkpoints: ``cifar`` (the
cyclical paper's ResNet-18 on CIFAR-10/100, ``python -m sgsim.torch.experiments.cifar``),
``uncertainty`` (its Figure 4: an MLP on MNIST digits, out-of-distribution entropy) and
``bnn_regression`` (the repulsive-forces paper's Tables 4-5: one-hidden-layer BNNs). The
backend (the optimizers, the sample store, the schedule driver) imports nothing from here.
"""
