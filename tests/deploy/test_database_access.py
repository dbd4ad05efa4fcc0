"""DatabaseAccess in template.yaml (no AWS needed): proxy, today's path, or data-api, the created
cluster through the RDS Data API with no proxy, no VPC and a cluster that pauses at 0 ACU."""

from __future__ import annotations

from typing import Any

import pytest

from rushmem.config import Settings
from tests.deploy.cfn import NO_VALUE, Stack

NETWORK = {"VpcId": "vpc-1", "SubnetIds": "subnet-a,subnet-b", "SecurityGroupIds": "sg-1"}
CLUSTER_ARN = "<DatabaseCluster.DBClusterArn>"
DATA_API_ACTIONS = {
    "rds-data:ExecuteStatement",
    "rds-data:BatchExecuteStatement",
    "rds-data:BeginTransaction",
    "rds-data:CommitTransaction",
    "rds-data:RollbackTransaction",
}
PROXY_RESOURCES = (
    "DatabaseProxy",
    "DatabaseProxyRole",
    "DatabaseProxyTargetGroup",
    "DatabaseSecurityGroup",
    "DatabaseSecurityGroupSelfIngress",
)
REQUEST_FUNCTIONS = ("RecallFunction", "IngestFunction")


def settings_of(environment: dict[str, str]) -> Settings:
    fields = {k.removeprefix("RUSHMEM_").lower(): v for k, v in environment.items() if k.startswith("RUSHMEM_")}
    return Settings(**fields)  # type: ignore[arg-type]


def data_api(template: dict[str, Any], **more: str) -> Stack:
    return Stack(template, CreateDatabase="true", DatabaseAccess="data-api", **more)


def data_api_actions(stack: Stack, function: str) -> set[str]:
    found: set[str] = set()
    for statement in stack.statements(function):
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        if any(a.startswith("rds-data:") for a in actions):
            assert statement["Resource"] == CLUSTER_ARN, (function, statement)  # the cluster, nothing wider
            found.update(actions)
    return found


def test_proxy_is_the_default_and_keeps_todays_stack(template: dict[str, Any]) -> None:
    assert template["Parameters"]["DatabaseAccess"]["Default"] == "proxy"
    s = Stack(template, CreateDatabase="true", **NETWORK)
    assert s.failed_rules() == []
    assert all(s.exists(r) for r in PROXY_RESOURCES)
    cluster = s.properties("DatabaseCluster")
    assert "EnableHttpEndpoint" not in cluster
    assert cluster["ServerlessV2ScalingConfiguration"] == {"MinCapacity": "0.5", "MaxCapacity": "4"}
    assert s.eval(template["Globals"]["Function"]["VpcConfig"])["SubnetIds"] == ["subnet-a", "subnet-b"]
    for function in (*REQUEST_FUNCTIONS, "MigrateFunction"):
        assert data_api_actions(s, function) == set()
        assert "RUSHMEM_DB_CLUSTER_ARN" not in s.environment(function)


def test_data_api_has_no_proxy_no_vpc_and_a_cluster_that_pauses(template: dict[str, Any]) -> None:
    s = data_api(template)
    assert s.failed_rules() == []
    for resource in PROXY_RESOURCES:
        assert not s.exists(resource), resource
    assert not s.exists("DatabaseSubnetGroup")  # none given: the default VPC's subnets
    assert s.eval(template["Globals"]["Function"]["VpcConfig"]) is NO_VALUE  # outside any VPC
    cluster = s.properties("DatabaseCluster")
    assert cluster["EnableHttpEndpoint"] is True
    assert cluster["ServerlessV2ScalingConfiguration"] == {
        "MinCapacity": 0,
        "MaxCapacity": "4",
        "SecondsUntilAutoPause": "300",
    }
    assert "VpcSecurityGroupIds" not in cluster and "DBSubnetGroupName" not in cluster
    with_subnets = data_api(template, SubnetIds="subnet-a,subnet-b", DatabaseAutoPauseSeconds="3600")
    assert with_subnets.properties("DatabaseCluster")["DBSubnetGroupName"] == "<DatabaseSubnetGroup>"
    assert (
        with_subnets.properties("DatabaseCluster")["ServerlessV2ScalingConfiguration"]["SecondsUntilAutoPause"]
        == "3600"
    )
    assert with_subnets.eval(template["Globals"]["Function"]["VpcConfig"]) is NO_VALUE  # the functions still outside


def test_data_api_functions_use_the_cluster_and_their_own_secret(template: dict[str, Any]) -> None:
    s = data_api(template)
    for function in REQUEST_FUNCTIONS:
        settings = settings_of(s.environment(function))
        assert settings.uses_data_api and settings.db_cluster_arn == CLUSTER_ARN, function
        assert settings.db_secret_arn == "<AppDatabaseSecret>" and settings.db_host is None, function
        assert not settings.db_iam_auth and settings.db_role is None, function
        assert data_api_actions(s, function) == DATA_API_ACTIONS, function
        assert s.resources_for(function, "secretsmanager:GetSecretValue") == ["<AppDatabaseSecret>"], function
        assert s.resources_for(function, "rds-db:connect") == [], function
    assert settings_of(s.environment("RecallFunction")).db_resume_wait_s == 0  # answer now, memory unavailable
    assert settings_of(s.environment("IngestFunction")).db_resume_wait_s == 30  # then SQS redelivers
    migrate = settings_of(s.environment("MigrateFunction"))
    assert migrate.uses_data_api and migrate.db_secret_arn == "<DatabaseSecret>"  # the owner
    assert migrate.app_db_secret_arn == "<AppDatabaseSecret>"  # the login role it sets up for the others
    assert data_api_actions(s, "MigrateFunction") == DATA_API_ACTIONS
    assert s.resources_for("MigrateFunction", "secretsmanager:GetSecretValue") == [
        "<AppDatabaseSecret>",
        "<DatabaseSecret>",
    ]
    dense = s.eval(template["Resources"]["MigrateFunction"]["Properties"]["Events"]["DenseUsers"])
    assert dense["Properties"]["State"] == "DISABLED"  # an hourly run would wake the paused cluster
    # With an event bus, the outbox's 5-minute drain would keep it awake: off (each write drains).
    with_bus = data_api(template, EventBusName="changes")
    drain = with_bus.eval(template["Resources"]["EventsFunction"]["Properties"]["Events"]["Drain"])
    assert with_bus.exists("EventsFunction") and drain["Properties"]["State"] == "DISABLED"
    assert s.eval(template["Outputs"]["DatabaseEndpoint"]["Value"]) == CLUSTER_ARN
    assert "<DatabaseInstance>" in s.eval(template["Resources"]["SchemaMigration"]["Properties"]["Database"])


@pytest.mark.parametrize(
    ("parameters", "refusal"),
    [
        ({"DatabaseAccess": "data-api", "DatabaseHost": "db.example.com", "DatabaseIamAuth": "true",
          "DatabaseResourceId": "db-1"}, "DatabaseAccess=data-api needs CreateDatabase=true"),
        ({"DatabaseAccess": "data-api", "CreateDatabase": "true", "DatabaseReaders": "1"}, "DatabaseReaders must be 0"),
        ({"DatabaseAccess": "data-api", "CreateDatabase": "true", "DatabaseReaderHost": "ro.example.com"},
         "DatabaseReaderHost must be empty"),
        ({"DatabaseAccess": "proxy", "CreateDatabase": "true"}, "DatabaseAccess=proxy needs VpcId"),
    ],
)  # fmt: skip
def test_rules_refuse_inconsistent_combinations(
    template: dict[str, Any], parameters: dict[str, str], refusal: str
) -> None:
    failed = Stack(template, **parameters).failed_rules()
    assert any(refusal in message for message in failed), failed
