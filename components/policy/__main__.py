"""Entry point of the policy pack: ``pulumi preview --policy-pack components/policy``.

The Pulumi CLI runs this file from this directory; the repository root goes on ``sys.path`` so the pack
shares ``components.policy.rules`` (and the contract) with ``gpurt plan`` instead of copying them.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pulumi_policy import EnforcementLevel, PolicyPack

from components.policy.pack import PACK_NAME, build_policies

PolicyPack(name=PACK_NAME, policies=build_policies(), enforcement_level=EnforcementLevel.MANDATORY)
