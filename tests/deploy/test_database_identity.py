"""Who each function is to the database, in every deployment mode of template.yaml (no AWS needed).

RecallFunction and IngestFunction must never log in as the owner of the tables (an owner can
switch row-level security off); MigrateFunction logs in as the owner and sets up their login
role. Each function may connect as, and read the secret of, exactly its own database user.
"""

from __future__ import annotations

from typing import Any

import pytest

from rushmem.config import Settings
from tests.deploy.cfn import PROXY_ID, Stack, dbuser_arn

REQUEST_FUNCTIONS = ("RecallFunction", "IngestFunction")
OWNER_SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:agent-memory/owner-AbCdEf"
APP_SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:agent-memory/app-GhIjKl"
NETWORK = {"VpcId": "vpc-1", "SubnetIds": "subnet-a,subnet-b", "SecurityGroupIds": "sg-1"}
MODES: dict[str, dict[str, str]] = {
    "created": {"CreateDatabase": "true", **NETWORK},
    "existing-iam": {"DatabaseHost": "db.example.com", "DatabaseIamAuth": "true", "DatabaseResourceId": "db-ABC123"},
    "existing-app-secret": {
        "DatabaseHost": "db.example.com",
        "DatabaseSecretArn": OWNER_SECRET,
        "AppDatabaseSecretArn": APP_SECRET,
    },
    "existing-owner-secret": {"DatabaseHost": "db.example.com", "DatabaseSecretArn": OWNER_SECRET},
}


@pytest.fixture(params=sorted(MODES))
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def stack(template: dict[str, Any], mode: str, **more: str) -> Stack:
    return Stack(template, **MODES[mode], **more)


def settings_of(environment: dict[str, str]) -> Settings:
    """The Settings a function builds from its environment (every value must parse)."""
    fields = {k.removeprefix("RUSHMEM_").lower(): v for k, v in environment.items() if k.startswith("RUSHMEM_")}
    return Settings(**fields)  # type: ignore[arg-type]  # pydantic parses the strings, as from the environment


def test_every_mode_passes_the_rules(template: dict[str, Any], mode: str) -> None:
    assert stack(template, mode).failed_rules() == []


def test_request_functions_log_in_as_the_application_role_never_the_owner(template: dict[str, Any], mode: str) -> None:
    s = stack(template, mode)
    for function in REQUEST_FUNCTIONS:
        settings = settings_of(s.environment(function))
        assert settings.app_db_user is None and settings.app_db_secret_arn is None, function  # not theirs to do
        if mode in {"created", "existing-iam"}:
            assert settings.db_iam_auth and settings.db_user == "agent_memory_app_login", function
            assert settings.db_secret_arn is None and settings.db_role is None, function
        elif mode == "existing-app-secret":
            assert settings.db_secret_arn == APP_SECRET and settings.db_role is None, function
            assert not settings.db_iam_auth and settings.db_user is None, function
        else:  # the fallback: the owner's secret, then SET ROLE on a connection of its own
            assert settings.db_secret_arn == OWNER_SECRET and settings.db_role == "agent_memory_app", function
        assert not settings.auto_migrate and not settings.db_prepared_statements, function


def test_migrate_function_logs_in_as_the_owner_and_sets_up_the_application_role(
    template: dict[str, Any], mode: str
) -> None:
    s = stack(template, mode)
    settings = settings_of(s.environment("MigrateFunction"))
    by_mode: dict[str, dict[str, Any]] = {
        "created": {
            "db_user": "agent_memory",
            "db_iam_auth": True,
            "db_secret_arn": None,
            "app_db_user": "agent_memory_app_login",
            "app_db_secret_arn": "<AppDatabaseSecret>",
            "app_db_iam_auth": False,  # RDS Proxy logs in with the password; rds_iam would refuse it
            "db_role": None,
        },
        "existing-iam": {
            "db_user": "agent_memory",
            "db_iam_auth": True,
            "db_secret_arn": None,
            "app_db_user": "agent_memory_app_login",
            "app_db_secret_arn": None,
            "app_db_iam_auth": True,
            "db_role": None,
        },
        "existing-app-secret": {
            "db_user": None,
            "db_iam_auth": False,
            "db_secret_arn": OWNER_SECRET,
            "app_db_user": None,  # the DBA made that role (see docs/deployment.md)
            "app_db_secret_arn": None,
            "app_db_iam_auth": False,
            "db_role": None,
        },
        "existing-owner-secret": {
            "db_user": None,
            "db_iam_auth": False,
            "db_secret_arn": OWNER_SECRET,
            "app_db_user": None,
            "app_db_secret_arn": None,
            "app_db_iam_auth": False,
            "db_role": "agent_memory_app",  # migrate() lets the owner SET ROLE it, and checks that it can
        },
    }
    expected = by_mode[mode]
    assert {name: getattr(settings, name) for name in expected} == expected


def test_the_custom_resource_carries_the_same_login_settings(template: dict[str, Any], mode: str) -> None:
    """A changed AppDatabaseUser must re-run the migration (only a changed property does)."""
    s = stack(template, mode)
    props = s.properties("SchemaMigration")
    env = settings_of(s.environment("MigrateFunction"))
    assert (props["AppDatabaseUser"] or None) == env.app_db_user
    assert (props["AppDatabaseSecretArn"] or None) == env.app_db_secret_arn
    assert props["AppDatabaseIamAuth"] == str(env.app_db_iam_auth).lower()


def test_each_function_may_connect_as_exactly_its_own_database_user(template: dict[str, Any], mode: str) -> None:
    s = stack(template, mode)
    resource_id = {"created": PROXY_ID, "existing-iam": "db-ABC123"}.get(mode)
    for function in REQUEST_FUNCTIONS:
        expected = [dbuser_arn(resource_id, "agent_memory_app_login")] if resource_id else []
        assert s.resources_for(function, "rds-db:connect") == expected, function
    expected = [dbuser_arn(resource_id, "agent_memory")] if resource_id else []
    assert s.resources_for("MigrateFunction", "rds-db:connect") == expected


def test_each_function_reads_exactly_the_database_secrets_it_logs_in_with(template: dict[str, Any], mode: str) -> None:
    s = stack(template, mode)
    request = {
        "created": [],
        "existing-iam": [],
        "existing-app-secret": [APP_SECRET],
        "existing-owner-secret": [OWNER_SECRET],
    }[mode]
    migrate = {
        "created": ["<AppDatabaseSecret>"],  # to give the login role that password
        "existing-iam": [],
        "existing-app-secret": [OWNER_SECRET],
        "existing-owner-secret": [OWNER_SECRET],
    }[mode]
    for function in REQUEST_FUNCTIONS:
        assert s.resources_for(function, "secretsmanager:GetSecretValue") == request, function
    assert s.resources_for("MigrateFunction", "secretsmanager:GetSecretValue") == migrate


def test_rds_proxy_has_a_secret_for_both_database_users(template: dict[str, Any]) -> None:
    s = stack(template, "created")
    auth = s.properties("DatabaseProxy")["Auth"]
    assert sorted(a["SecretArn"] for a in auth) == ["<AppDatabaseSecret>", "<DatabaseSecret>"]
    assert all(a["AuthScheme"] == "SECRETS" and a["IAMAuth"] == "REQUIRED" for a in auth)
    role = s.properties("DatabaseProxyRole")["Policies"][0]["PolicyDocument"]["Statement"]
    assert role == [
        {
            "Effect": "Allow",
            "Action": "secretsmanager:GetSecretValue",
            "Resource": ["<DatabaseSecret>", "<AppDatabaseSecret>"],
        }
    ]
    # The proxy maps an IAM client to the secret whose username it names.
    owner = s.properties("DatabaseSecret")["GenerateSecretString"]["SecretStringTemplate"]
    app = s.properties("AppDatabaseSecret")["GenerateSecretString"]["SecretStringTemplate"]
    assert owner == '{"username": "agent_memory"}' and app == '{"username": "agent_memory_app_login"}'
    assert s.properties("AppDatabaseSecret")["GenerateSecretString"]["GenerateStringKey"] == "password"


def test_a_chosen_application_user_flows_everywhere(template: dict[str, Any]) -> None:
    s = stack(template, "created", AppDatabaseUser="memories_rw")
    assert {settings_of(s.environment(f)).db_user for f in REQUEST_FUNCTIONS} == {"memories_rw"}
    assert settings_of(s.environment("MigrateFunction")).app_db_user == "memories_rw"
    assert s.resources_for("RecallFunction", "rds-db:connect") == [dbuser_arn(PROXY_ID, "memories_rw")]
    assert "memories_rw" in s.properties("AppDatabaseSecret")["GenerateSecretString"]["SecretStringTemplate"]


@pytest.mark.parametrize(
    ("parameters", "complaint"),
    [
        ({**MODES["existing-iam"], "AppDatabaseUser": "agent_memory"}, "must differ from DatabaseUser"),
        ({**MODES["created"], "AppDatabaseUser": "agent_memory_app"}, "not one of the group roles"),
        ({**MODES["existing-iam"], "AppDatabaseSecretArn": APP_SECRET}, "AppDatabaseSecretArn goes with"),
        ({**MODES["created"], "AppDatabaseSecretArn": APP_SECRET}, "AppDatabaseSecretArn goes with"),
    ],
)
def test_rules_refuse_an_owner_or_group_role_as_the_login_and_a_misplaced_secret(
    template: dict[str, Any], parameters: dict[str, str], complaint: str
) -> None:
    failed = Stack(template, **parameters).failed_rules()
    assert any(complaint in message for message in failed), failed


def test_the_stack_says_who_the_request_functions_are(template: dict[str, Any], mode: str) -> None:
    value = stack(template, mode).eval(template["Outputs"]["RequestFunctionsDatabaseLogin"]["Value"])
    assert (
        value
        == {
            "created": "agent_memory_app_login (IAM authentication)",
            "existing-iam": "agent_memory_app_login (IAM authentication)",
            "existing-app-secret": "the user in AppDatabaseSecretArn",
            "existing-owner-secret": "the owner, then SET ROLE agent_memory_app",
        }[mode]
    )
