"""The TalosOperation kind's controller code: starting operations the controller itself
decides on (``starts`` pure, ``starter`` I/O), and, as the layout moves in, the executor."""
