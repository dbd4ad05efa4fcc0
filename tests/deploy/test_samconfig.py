"""samconfig.toml's profiles deploy template.yaml as docs/deployment.md says: each names only the
template's parameters with allowed values, quickstart needs nothing more, dev only the network."""

from __future__ import annotations

import shlex
import tomllib
from typing import Any

import pytest

from tests.deploy.cfn import Stack
from tests.deploy.conftest import REPO

PROFILES = ("default", "quickstart", "dev", "prod")
NETWORK = {"VpcId": "vpc-0abc", "SubnetIds": "subnet-0a,subnet-0b", "SecurityGroupIds": "sg-0abc"}


def overrides(profile: str) -> dict[str, str]:
    config = tomllib.loads((REPO / "samconfig.toml").read_text(encoding="utf-8"))
    text = config[profile]["deploy"]["parameters"]["parameter_overrides"]
    return dict(item.split("=", 1) for item in shlex.split(text))


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_sets_parameters_of_the_template_to_allowed_values(
    template: dict[str, Any], profile: str
) -> None:
    for name, value in overrides(profile).items():
        assert name in template["Parameters"], f"{profile}: {name} is not a parameter of template.yaml"
        allowed = template["Parameters"][name].get("AllowedValues")
        assert allowed is None or value in [str(v) for v in allowed], f"{profile}: {name}={value}"


def test_quickstart_deploys_without_a_question(template: dict[str, Any]) -> None:
    stack = Stack(template, **overrides("quickstart"))
    assert stack.failed_rules() == []
    # No VPC, a created database through the Data API, a user pool for MCP hosts.
    assert stack.condition("UseDataApi") and not stack.condition("FunctionsInVpc")
    assert stack.condition("CreateUserPool")
    # `sam delete` goes through, and keeps what holds data: the cluster, its instance, both secrets
    # and the dead-letter queue (Retain, on deletion and on replacement; docs/deployment.md step 7).
    assert stack.properties("DatabaseCluster")["DeletionProtection"] == "false"
    kept = [
        "DatabaseCluster",
        "DatabaseInstance",
        "DatabaseSecret",
        "AppDatabaseSecret",
        "ConversationEndedDeadLetterQueue",
    ]
    for name in kept:
        assert stack.exists(name), name
        resource = template["Resources"][name]
        assert (resource["DeletionPolicy"], resource["UpdateReplacePolicy"]) == ("Retain", "Retain"), name
    # What the kept cluster uses is kept with it (deleting it would fail the stack's deletion).
    for name in ("DatabaseSubnetGroup", "DatabaseSecurityGroup", "DatabaseReaderInstance"):
        assert template["Resources"][name]["DeletionPolicy"] == "Retain", name


def test_dev_needs_only_the_network(template: dict[str, Any]) -> None:
    failed = Stack(template, **overrides("dev")).failed_rules()
    assert {f.split(" needs ")[-1].split(" ")[0].rstrip(".") for f in failed} == set(NETWORK)
    assert Stack(template, **overrides("dev"), **NETWORK).failed_rules() == []


@pytest.mark.parametrize(
    ("profile", "snapstart"), [("quickstart", "None"), ("dev", "None"), ("prod", "PublishedVersions")]
)
def test_snapstart_is_on_only_where_no_paused_database_dwarfs_what_it_saves(
    template: dict[str, Any], profile: str, snapstart: str
) -> None:
    """quickstart's and dev's clusters pause (a ~15 s resume), so SnapStart's ~0.5 s off a cold start
    is not worth its $7.91 a month there; prod keeps the template's default (docs/cost.md)."""
    chosen = overrides(profile).get("SnapStart", template["Parameters"]["SnapStart"]["Default"])
    assert chosen == snapstart
    stack = Stack(template, **overrides(profile), **(NETWORK if profile == "dev" else {}))
    for name in ("RecallFunction", "IngestFunction"):
        assert stack.properties(name)["SnapStart"] == {"ApplyOn": snapstart}, name
