"""Pure path rules: Talos upgrade paths, Kubernetes skew and pairing, and the
one target rule the plan and the executors both apply, and the upgrade choices built
from it (``targets``). No I/O."""
