"""Pure path rules: Talos upgrade paths, Kubernetes skew and pairing, and the
one target rule the plan and the executors both apply (``rule``), the upgrade choices
built from it (``choices``), why a release is not offered (``blocked``) and the path
plans (``path_plan``). No I/O."""
