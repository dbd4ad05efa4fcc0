"""template.yaml keeps the promises the deployment depends on (checked without AWS).

`sam validate --lint` (make sam-validate) checks the template against CloudFormation's
schemas; these tests check what no linter knows: our routes, our timeouts, our settings.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from rushmem.config import Settings
from rushmem.providers import lifecycle
from rushmem_tools.local import runtime as lambda_local
from tests.deploy.cfn import REGION, Stack
from tests.deploy.conftest import TEMPLATE

# Every operation reaches the function through the catch-all (its authorisation chosen by the
# parameter), so none is routed by name: a new operation needs no route. The memory page's root is
# not matched by /{proxy+}.
ROUTES = {("GET", "/")}
# Read by MCP hosts before they hold a token: no authorizer in front.
PUBLIC_ROUTES = {
    ("GET", "/.well-known/oauth-protected-resource"),
    ("GET", "/.well-known/oauth-protected-resource/mcp"),
    ("GET", "/.well-known/oauth-authorization-server"),
}
# Unknown paths and wrong methods reach the function too, for its JSON 404/405.
CATCH_ALL = ("ANY", "/{proxy+}")
ANY_METHOD = "x-amazon-apigateway-any-method"


def functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == lambda_local.SERVERLESS_FUNCTION}


def walk(node: Any) -> Iterator[Any]:
    yield node
    if isinstance(node, dict):
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


def test_globals_run_python313_on_the_chosen_architecture_with_tracing(template: dict[str, Any]) -> None:
    glob = template["Globals"]["Function"]
    assert glob["Runtime"] == "python3.13"
    assert glob["Architectures"] == [{"Ref": "Architecture"}]
    assert template["Parameters"]["Architecture"]["Default"] == "arm64"
    # Tracing is a parameter (Active by default); off, the functions do not import the X-Ray SDK.
    assert template["Parameters"]["Tracing"]["Default"] == "Active"
    assert glob["Tracing"] == {"Fn::If": ["TracingOn", "Active", "PassThrough"]}
    disabled = glob["Environment"]["Variables"]["POWERTOOLS_TRACE_DISABLED"]
    assert disabled == {"Fn::If": ["TracingOn", "false", "true"]}
    assert glob["Layers"] == [{"Ref": "MemoryLayer"}]
    layer = template["Resources"]["MemoryLayer"]
    assert layer["Metadata"]["BuildMethod"] == "makefile"
    assert layer["Properties"]["CompatibleArchitectures"] == [{"Ref": "Architecture"}]


def test_every_function_has_a_handler_limits_and_a_log_group_with_retention(template: dict[str, Any]) -> None:
    resources = template["Resources"]
    for name, function in functions(template).items():
        props = function["Properties"]
        assert props["Handler"] == "app.lambda_handler", name
        assert props["CodeUri"].startswith("functions/"), name
        assert isinstance(props["Timeout"], int) and isinstance(props["MemorySize"], int), name
        group = resources[props["LoggingConfig"]["LogGroup"]["Ref"]]
        assert group["Type"] == "AWS::Logs::LogGroup", name
        assert group["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}, name
    assert {"IngestFunction", "RecallFunction", "MigrateFunction"} <= set(functions(template))
    assert functions(template)["IngestFunction"]["Properties"]["CodeUri"] == "functions/ingest"
    assert functions(template)["RecallFunction"]["Properties"]["CodeUri"] == "functions/recall"


def test_queue_visibility_outlasts_six_ingest_timeouts_plus_the_batching_window(template: dict[str, Any]) -> None:
    resources = template["Resources"]
    queue = resources["ConversationEndedQueue"]["Properties"]
    ingest = resources["IngestFunction"]["Properties"]
    window = template["Parameters"]["IngestMaximumBatchingWindowInSeconds"]["MaxValue"]
    assert queue["VisibilityTimeout"] >= 6 * ingest["Timeout"] + window
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": "ConversationEndedDeadLetterQueue.Arn"},
        "maxReceiveCount": 5,
    }
    assert queue["SqsManagedSseEnabled"] is True
    assert resources["ConversationEndedDeadLetterQueue"]["Properties"]["SqsManagedSseEnabled"] is True
    alarm = resources["DeadLetterQueueAlarm"]["Properties"]
    assert alarm["Dimensions"][0]["Value"] == {"Fn::GetAtt": "ConversationEndedDeadLetterQueue.QueueName"}
    assert alarm["Threshold"] == 0 and alarm["ComparisonOperator"] == "GreaterThanThreshold"


def test_ingest_reads_the_queue_with_partial_batch_failures_and_bounded_concurrency(template: dict[str, Any]) -> None:
    event = template["Resources"]["IngestFunction"]["Properties"]["Events"]["ConversationEnded"]
    assert event["Type"] == "SQS"
    props = event["Properties"]
    assert props["Queue"] == {"Fn::GetAtt": "ConversationEndedQueue.Arn"}
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["BatchSize"] == {"Ref": "IngestBatchSize"}
    assert props["MaximumBatchingWindowInSeconds"] == {"Ref": "IngestMaximumBatchingWindowInSeconds"}
    assert props["ScalingConfig"] == {"MaximumConcurrency": {"Ref": "IngestMaximumConcurrency"}}


def test_every_route_is_an_event_and_carries_the_parameter_chosen_authorisation(template: dict[str, Any]) -> None:
    events = template["Resources"]["RecallFunction"]["Properties"]["Events"].values()
    routes = {(e["Properties"]["Method"], e["Properties"]["Path"]) for e in events if e["Type"] == "HttpApi"}
    assert routes == ROUTES | PUBLIC_ROUTES | {CATCH_ALL}
    assert all(e["Properties"]["ApiId"] == {"Ref": "MemoryApi"} for e in events)
    body = template["Resources"]["MemoryApi"]["Properties"]["DefinitionBody"]
    documented = {
        ("ANY" if method == ANY_METHOD else method.upper(), path)
        for path, item in body["paths"].items()
        for method in item
    }
    assert documented == ROUTES | PUBLIC_ROUTES | {CATCH_ALL}
    expected = {"Fn::If": ["UseJwtAuth", [{"JwtAuthorizer": []}], [{"AWS_IAM": []}]]}
    for path, item in body["paths"].items():
        for method, operation in item.items():
            if (method.upper(), path) in PUBLIC_ROUTES:
                assert "security" not in operation, path
            else:
                assert operation["security"] == expected, path
    assert template["Parameters"]["ApiAuthorization"]["Default"] == "AWS_IAM"


def test_no_policy_grants_a_wildcard_action(template: dict[str, Any]) -> None:
    actions: list[str] = []
    for node in walk(template["Resources"]):
        # A Deny grants nothing (the ledger bucket's TLS-only statement denies s3:* over plain HTTP).
        if isinstance(node, dict) and "Action" in node and node.get("Effect") == "Allow":
            value = node["Action"]
            actions.extend(value if isinstance(value, list) else [value])
    assert actions, "no IAM statements found"
    assert not [a for a in actions if "*" in a]


def test_every_agent_memory_variable_in_the_template_is_a_setting(template: dict[str, Any]) -> None:
    names: set[str] = set()
    for node in walk(template):
        if isinstance(node, dict) and "Variables" in node:
            names.update(k for k in node["Variables"] if k.startswith("RUSHMEM_"))
    assert names, "no RUSHMEM_* variables found"
    unknown = {n for n in names if n.removeprefix("RUSHMEM_").lower() not in Settings.model_fields}
    assert not unknown, f"not settings (typo?): {sorted(unknown)}"


def test_lambda_uses_a_remote_embedder_and_no_ddl_at_request_time(template: dict[str, Any]) -> None:
    variables = template["Globals"]["Function"]["Environment"]["Variables"]
    assert set(template["Parameters"]["EmbeddingProvider"]["AllowedValues"]) == {"bedrock", "openai"}
    assert variables["RUSHMEM_AUTO_MIGRATE"] == "false"
    assert variables["RUSHMEM_DB_PREPARED_STATEMENTS"] == "false"
    assert Settings(db_prepared_statements="false").db_prepared_statements is False  # type: ignore[arg-type]


def test_bedrock_permission_defaults_match_the_package_defaults(template: dict[str, Any]) -> None:
    fallbacks = [
        node["Fn::If"][2]
        for node in walk(template["Resources"]["IngestFunction"]["Properties"]["Policies"])
        if isinstance(node, dict) and "Fn::If" in node and node["Fn::If"][0] in {"HasEmbeddingModel", "HasLlmModel"}
    ]
    assert lifecycle.DEFAULT_EMBEDDING_MODEL in fallbacks
    # The extraction model's follows the Region, as the package's does (default_extraction_model).
    by_region = {"Fn::If": ["BedrockInUs", lifecycle.DEFAULT_EXTRACTION_MODEL, lifecycle.GLOBAL_EXTRACTION_MODEL]}
    assert by_region in fallbacks


def test_outputs_name_the_api_and_both_queues(template: dict[str, Any]) -> None:
    assert {"ApiUrl", "ConversationEndedQueueUrl", "DeadLetterQueueUrl"} <= set(template["Outputs"])


def test_rushmem_invoke_reads_every_function(template: dict[str, Any]) -> None:
    for name in functions(template):
        spec = lambda_local.function_spec(TEMPLATE, name)
        assert spec.module == "app" and spec.handler == "lambda_handler"
        # Only POWERTOOLS_* values apply locally; the RUSHMEM_* ones point at AWS resources.
        assert spec.environment and all(k.startswith("POWERTOOLS_") for k in spec.environment)
        assert spec.layer_paths and spec.layer_paths[0].name == "shared"


def test_the_request_functions_run_published_versions_with_snapstart(template: dict[str, Any]) -> None:
    """The API and the queue invoke alias 'live'; every deploy that changes anything (the code is
    in the layer, not in CodeUri) publishes a version that SnapStart snapshots."""
    assert template["Parameters"]["SnapStart"]["Default"] == "PublishedVersions"
    assert set(template["Parameters"]["SnapStart"]["AllowedValues"]) == {"PublishedVersions", "None"}
    for name, props in ((n, f["Properties"]) for n, f in functions(template).items()):
        if name in {"RecallFunction", "IngestFunction"}:
            assert props["AutoPublishAlias"] == "live", name
            assert props["AutoPublishAliasAllProperties"] is True, name
            assert props["SnapStart"] == {"ApplyOn": {"Ref": "SnapStart"}}, name
        else:  # runs once per deploy: nothing to snapshot
            assert "SnapStart" not in props, name


def test_reads_go_to_the_reader_endpoint_a_deployment_names_or_creates(template: dict[str, Any]) -> None:
    variables = template["Globals"]["Function"]["Environment"]["Variables"]
    assert variables["RUSHMEM_DB_READER_HOST"] == {
        "Fn::If": [
            "HasReaderHost",
            {"Ref": "DatabaseReaderHost"},
            {
                "Fn::If": [
                    "CreateReaders",
                    {"Fn::GetAtt": "DatabaseProxyReaderEndpoint.Endpoint"},
                    {"Ref": "AWS::NoValue"},
                ]
            },
        ]
    }
    resources = template["Resources"]
    assert resources["DatabaseReaderInstance"]["Condition"] == "CreateReaders"
    endpoint = resources["DatabaseProxyReaderEndpoint"]
    assert endpoint["Condition"] == "CreateReaders"
    assert endpoint["Properties"]["TargetRole"] == "READ_ONLY"
    assert endpoint["Properties"]["DBProxyName"] == {"Ref": "DatabaseProxy"}
    assert template["Parameters"]["DatabaseReaders"]["Default"] == "0"
    assert "DatabaseReaderEndpoint" in template["Outputs"]


# ---- sign-in for MCP hosts: ApiAuthorization=COGNITO | JWT | AWS_IAM ---------------------------

COGNITO_RESOURCES = {"UserPool", "UserPoolDomain", "McpClient"}
# Any database the rules accept without more values.
DATABASE = {"CreateDatabase": "true", "DatabaseAccess": "data-api"}


def _authorizer(stack: Stack) -> dict[str, Any]:
    body = stack.properties("MemoryApi")["DefinitionBody"]
    scheme: dict[str, Any] = body["components"]["securitySchemes"].get("JwtAuthorizer", {})
    return scheme


def test_cognito_creates_a_user_pool_whose_tokens_the_jwt_authorizer_verifies(template: dict[str, Any]) -> None:
    stack = Stack(template, ApiAuthorization="COGNITO", **DATABASE)
    assert stack.failed_rules() == []
    assert all(stack.exists(r) for r in COGNITO_RESOURCES)
    issuer = f"https://cognito-idp.{REGION}.amazonaws.com/<UserPool>"
    config = _authorizer(stack)["x-amazon-apigateway-authorizer"]
    assert config["type"] == "jwt" and config["identitySource"] == "$request.header.Authorization"
    # Cognito's access tokens have no aud: the authorizer then matches their client_id.
    assert config["jwtConfiguration"] == {"issuer": issuer, "audience": ["<McpClient>"]}
    routes = stack.properties("MemoryApi")["DefinitionBody"]["paths"]
    # MCP (POST /mcp) and every operation reach the function through the catch-all, behind the JWT.
    assert routes["/{proxy+}"]["x-amazon-apigateway-any-method"]["security"] == [{"JwtAuthorizer": []}]
    # The function names the same issuer in the OAuth metadata MCP hosts read.
    env = stack.environment("RecallFunction")
    assert env["RUSHMEM_OAUTH_ISSUER"] == issuer
    assert env["RUSHMEM_OAUTH_SCOPES"] == "openid,email,profile"
    # The pool's own endpoints, served with S256 PKCE advertised (Cognito's metadata omits it).
    sign_in = f"https://<UserPoolDomain>.auth.{REGION}.amazoncognito.com/oauth2"
    assert env["RUSHMEM_OAUTH_AUTHORIZATION_ENDPOINT"] == f"{sign_in}/authorize"
    assert env["RUSHMEM_OAUTH_TOKEN_ENDPOINT"] == f"{sign_in}/token"
    settings = Settings.model_validate({k.removeprefix("RUSHMEM_").lower(): v for k, v in env.items() if "OAUTH" in k})
    assert settings.oauth_scopes == ("openid", "email", "profile") and settings.oauth_facade


def test_the_mcp_hosts_client_is_public_with_the_code_flow_and_the_hosts_callbacks(template: dict[str, Any]) -> None:
    stack = Stack(template, ApiAuthorization="COGNITO")
    client = stack.properties("McpClient")
    assert client["GenerateSecret"] is False  # hosts run on users' machines: PKCE, no secret
    assert client["AllowedOAuthFlows"] == ["code"] and client["AllowedOAuthFlowsUserPoolClient"] is True
    assert "https://claude.ai/api/mcp/auth_callback" in client["CallbackURLs"]
    assert "http://localhost:8787/callback" in client["CallbackURLs"]  # Cursor desktop
    assert client["AllowedOAuthScopes"] == ["openid", "email", "profile"]
    pool = stack.properties("UserPool")
    assert pool["AdminCreateUserConfig"] == {"AllowAdminCreateUserOnly": True}
    # Memories are keyed by the pool's subs: deleting the stack must not delete the pool.
    assert template["Resources"]["UserPool"]["DeletionPolicy"] == "Retain"
    assert stack.properties("UserPoolDomain")["Domain"] == "agent-memory-123456789012"
    named = Stack(template, ApiAuthorization="COGNITO", UserPoolDomainPrefix="acme-memory")
    assert named.properties("UserPoolDomain")["Domain"] == "acme-memory"


def test_any_oidc_issuer_is_verified_by_its_issuer_and_audience(template: dict[str, Any]) -> None:
    issuer = "https://login.example.com/tenant"
    stack = Stack(template, ApiAuthorization="JWT", JwtIssuer=issuer, JwtAudience="mcp,backend", **DATABASE)
    assert stack.failed_rules() == []
    assert not any(stack.exists(r) for r in COGNITO_RESOURCES)
    config = _authorizer(stack)["x-amazon-apigateway-authorizer"]["jwtConfiguration"]
    assert config == {"issuer": issuer, "audience": ["mcp", "backend"]}
    env = stack.environment("RecallFunction")
    assert env["RUSHMEM_OAUTH_ISSUER"] == issuer
    assert "RUSHMEM_OAUTH_AUTHORIZATION_ENDPOINT" not in env  # the issuer's metadata is used as it is
    endpoints = {"OAuthAuthorizationEndpoint": f"{issuer}/authorize", "OAuthTokenEndpoint": f"{issuer}/token"}
    facade = Stack(template, ApiAuthorization="JWT", JwtIssuer=issuer, JwtAudience="mcp", **endpoints, **DATABASE)
    assert facade.environment("RecallFunction")["RUSHMEM_OAUTH_TOKEN_ENDPOINT"] == f"{issuer}/token"
    no_issuer = Stack(template, ApiAuthorization="JWT", JwtAudience="x", **DATABASE).failed_rules()
    assert no_issuer == ["ApiAuthorization=JWT needs JwtIssuer."]


def test_iam_creates_no_user_pool_and_names_no_issuer(template: dict[str, Any]) -> None:
    stack = Stack(template)
    assert not any(stack.exists(r) for r in COGNITO_RESOURCES)
    assert _authorizer(stack) == {}
    assert not [k for k in stack.environment("RecallFunction") if k.startswith("RUSHMEM_OAUTH_") and "SCOPES" not in k]
    outputs = template["Outputs"]
    assert {"McpUrl", "OAuthIssuer", "McpClientId", "UserPoolId", "SignInUrl"} <= set(outputs)
    assert outputs["McpClientId"]["Condition"] == "CreateUserPool"


@pytest.mark.parametrize("bedrock_region", ["", "us-west-2", "eu-central-1", "ap-northeast-1"])
def test_the_default_extraction_profile_is_one_the_region_can_call(
    template: dict[str, Any], bedrock_region: str
) -> None:
    """The stack (us-east-1 here) calls Bedrock in BedrockRegion when set: the default model the
    functions may invoke is the profile the package picks for that Region (a quickstart in Europe
    failed its first deploy on the US one)."""
    stack = Stack(template, BedrockRegion=bedrock_region, **DATABASE)
    region = bedrock_region or REGION
    model = lifecycle.default_extraction_model(region)
    assert model.startswith("us." if region.startswith("us-") else "global.")
    for function in ("IngestFunction", "RecallFunction"):
        resources = stack.resources_for(function, "bedrock:InvokeModel")
        assert f"arn:aws:bedrock:{region}:123456789012:inference-profile/{model}" in resources
        assert "arn:aws:bedrock:*::foundation-model/amazon.nova-2-lite-v1:0" in resources


@pytest.mark.parametrize(
    ("llm_model", "profile", "foundation"),
    [
        ("", "us.amazon.nova-2-lite-v1:0", "amazon.nova-2-lite-v1:0"),
        ("us.anthropic.claude-haiku-4-5-20251001-v1:0", None, "anthropic.claude-haiku-4-5-20251001-v1:0"),
        ("global.amazon.nova-2-lite-v1:0", None, "amazon.nova-2-lite-v1:0"),
        ("eu.amazon.nova-2-lite-v1:0", None, "amazon.nova-2-lite-v1:0"),
        ("amazon.nova-2-lite-v1:0", None, "amazon.nova-2-lite-v1:0"),
    ],
)
def test_extraction_may_invoke_the_profile_and_the_model_behind_it_in_every_region(
    template: dict[str, Any], llm_model: str, profile: str | None, foundation: str
) -> None:
    """A cross-Region inference profile needs InvokeModel on the profile (in Bedrock's region) and on
    the foundation model in each destination Region; an in-Region id on the model in the region."""
    stack = Stack(template, LlmModel=llm_model, **DATABASE)
    model = llm_model or str(profile)
    for function in ("IngestFunction", "RecallFunction"):
        resources = stack.resources_for(function, "bedrock:InvokeModel")
        assert f"arn:aws:bedrock:{REGION}:123456789012:inference-profile/{model}" in resources
        assert f"arn:aws:bedrock:*::foundation-model/{foundation}" in resources
        assert f"arn:aws:bedrock:{REGION}::foundation-model/{model}" in resources
    lifecycle_reads = stack.resources_for("MigrateFunction", "bedrock:GetFoundationModel")
    assert f"arn:aws:bedrock:{REGION}::foundation-model/*" in lifecycle_reads
    assert stack.properties("SchemaMigration")["LlmModel"] == llm_model
    no_bedrock = Stack(template, LlmProvider="rules", EmbeddingProvider="openai", **DATABASE)
    assert no_bedrock.resources_for("MigrateFunction", "bedrock:GetFoundationModel") == []


# ---- cells: users spread over the stack's database and the secret's others -----------------------

CELLS_SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:agent-memory/cells-AbCdEf"
CELLS_OWNERS_SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:agent-memory/cells-owners-GhIjKl"
CELLS = {"CellsSecretArn": CELLS_SECRET, "CellsOwnerSecretArn": CELLS_OWNERS_SECRET}
# The profiles cells go with: the created database behind RDS Proxy, an existing one.
CELL_DATABASES = {
    "proxy": {"CreateDatabase": "true", "VpcId": "vpc-1", "SubnetIds": "subnet-a,subnet-b", "SecurityGroupIds": "sg-1"},
    "existing": {"DatabaseHost": "db.example.com", "DatabaseIamAuth": "true", "DatabaseResourceId": "db-ABC123"},
}
# Every function that reads users' data (EventsFunction: the change-event outbox).
DATABASE_FUNCTIONS = ("RecallFunction", "IngestFunction", "EventsFunction", "MigrateFunction")


@pytest.mark.parametrize("database", sorted(CELL_DATABASES))
def test_cells_are_read_from_their_secrets_by_every_function_that_reads_users_data(
    template: dict[str, Any], database: str
) -> None:
    """The request functions read the cells with their own logins; MigrateFunction reads the owners'
    (it migrates every cell), and a new secret re-runs the migration. Each may read its secret only."""
    stack = Stack(template, **CELLS, **CELL_DATABASES[database], EventBusName="bus")
    assert stack.failed_rules() == [] and stack.condition("HasCells")
    for function in ("RecallFunction", "IngestFunction", "EventsFunction"):
        assert stack.environment(function)["RUSHMEM_CELLS_SECRET_ARN"] == CELLS_SECRET, function
        secrets = stack.resources_for(function, "secretsmanager:GetSecretValue")
        assert CELLS_SECRET in secrets and CELLS_OWNERS_SECRET not in secrets, function
    assert stack.environment("MigrateFunction")["RUSHMEM_CELLS_SECRET_ARN"] == CELLS_OWNERS_SECRET
    secrets = stack.resources_for("MigrateFunction", "secretsmanager:GetSecretValue")
    assert CELLS_OWNERS_SECRET in secrets and CELLS_SECRET not in secrets
    assert stack.properties("SchemaMigration")["CellsOwnerSecretArn"] == CELLS_OWNERS_SECRET
    migrate_app = lambda_local.load_handler(lambda_local.function_spec(TEMPLATE, "MigrateFunction")).__globals__
    assert migrate_app["SETTING_PROPERTIES"]["CellsOwnerSecretArn"] == "cells_secret_arn"
    # Settings parse what the template sets.
    assert Settings(cells_secret_arn=CELLS_SECRET).cells_secret_arn == CELLS_SECRET


def test_without_cells_no_function_reads_a_cells_secret(template: dict[str, Any]) -> None:
    stack = Stack(template, **CELL_DATABASES["existing"], EventBusName="bus")
    assert not stack.condition("HasCells")
    for function in DATABASE_FUNCTIONS:
        assert "RUSHMEM_CELLS_SECRET_ARN" not in stack.environment(function), function
        assert not [s for s in stack.statements(function) if "cells" in str(s.get("Resource"))], function
    assert stack.properties("SchemaMigration")["CellsOwnerSecretArn"] == ""
    assert Settings(cells_secret_arn="").cells_secret_arn is None  # "" from a template is no cells


def test_cells_need_both_secrets_distinct_and_a_network(template: dict[str, Any]) -> None:
    existing = CELL_DATABASES["existing"]
    alone = Stack(template, CellsSecretArn=CELLS_SECRET, **existing).failed_rules()
    assert [r for r in alone if r.startswith("Cells need CellsSecretArn")]
    owners_alone = Stack(template, CellsOwnerSecretArn=CELLS_OWNERS_SECRET, **existing).failed_rules()
    assert [r for r in owners_alone if r.startswith("Cells need CellsSecretArn")]
    same = Stack(template, CellsSecretArn=CELLS_SECRET, CellsOwnerSecretArn=CELLS_SECRET, **existing).failed_rules()
    assert [r for r in same if r.startswith("CellsSecretArn must differ")]
    data_api = Stack(template, **CELLS, **DATABASE).failed_rules()
    assert [r for r in data_api if r.startswith("Cells go with DatabaseAccess=proxy")]
    pattern = template["Parameters"]["CellsSecretArn"]["AllowedPattern"]
    assert template["Parameters"]["CellsOwnerSecretArn"]["AllowedPattern"] == pattern
    assert re.fullmatch(pattern, CELLS_SECRET) and re.fullmatch(pattern, "")
    assert not re.fullmatch(pattern, "agent-memory/cells")  # a name, not the ARN IAM needs


def test_the_functions_switch_to_a_database_only_after_its_migration(template: dict[str, Any]) -> None:
    """A restored database forgets again (the erasure ledger) before a request function uses it:
    CloudFormation updates a resource after the ones it depends on."""
    resources = template["Resources"]
    for name in ("RecallFunction", "IngestFunction"):
        assert resources[name]["DependsOn"] == "SchemaMigration", name
    env = template["Globals"]["Function"]["Environment"]["Variables"]
    assert env["RUSHMEM_ERASURE_LEDGER"] == {"Fn::Sub": "s3://${ErasureLedgerBucket}/erasures/"}
    assert env["RUSHMEM_BACKUP_RETENTION_DAYS"] == {"Ref": "DatabaseBackupRetentionDays"}
    cluster = resources["DatabaseCluster"]["Properties"]
    assert cluster["BackupRetentionPeriod"] == {"Ref": "DatabaseBackupRetentionDays"}
    bucket = resources["ErasureLedgerBucket"]
    assert bucket["DeletionPolicy"] == "Retain"
    assert bucket["Properties"]["VersioningConfiguration"] == {"Status": "Enabled"}
    assert bucket["Properties"]["ObjectLockConfiguration"]["Rule"]["DefaultRetention"]["Days"] >= 35
