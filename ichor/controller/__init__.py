"""kopf handlers: TalosCluster, IchorInstallation (release check), TalosOperation."""
