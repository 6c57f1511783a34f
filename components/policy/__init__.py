"""Policy pack of the platform: the rules (``rules``) and their pulumi-policy wrappers (``pack``)."""
