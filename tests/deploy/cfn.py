"""A small evaluator of the CloudFormation intrinsics template.yaml uses, for one set of parameters.

Enough to ask, without AWS, what each function's environment and IAM statements become in each
deployment mode: Ref, Fn::If / Equals / Not / And / Or / Condition, Fn::Join, Fn::Sub,
Fn::Select, Fn::Split, Fn::GetAtt (placeholders) and the rule function Fn::Contains. Resources
are named by placeholders such as ``<AppDatabaseSecret>``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

ACCOUNT, REGION, PARTITION = "123456789012", "us-east-1", "aws"
PROXY_ID = "prx-0123456789abcdef0"
ATTRIBUTES = {
    "DatabaseProxy.DBProxyArn": f"arn:aws:rds:{REGION}:{ACCOUNT}:db-proxy:{PROXY_ID}",
    "DatabaseProxy.Endpoint": "agent-memory-memory.proxy-c0ffee.us-east-1.rds.amazonaws.com",
}
PSEUDO = {
    "AWS::AccountId": ACCOUNT,
    "AWS::Region": REGION,
    "AWS::Partition": PARTITION,
    "AWS::StackName": "agent-memory",
    "AWS::URLSuffix": "amazonaws.com",
}


class _NoValue:
    def __repr__(self) -> str:
        return "NoValue"


NO_VALUE = _NoValue()


class Stack:
    """template.yaml with parameter values: defaults, overridden by ``parameters``."""

    def __init__(self, template: dict[str, Any], **parameters: str) -> None:
        self.template = template
        unknown = set(parameters) - set(template["Parameters"])
        assert not unknown, f"not parameters of the template: {unknown}"
        self.parameters: dict[str, Any] = {}
        for name, spec in template["Parameters"].items():
            value = parameters.get(name, spec.get("Default", ""))
            if spec["Type"] == "CommaDelimitedList":
                value = str(value).split(",")
            self.parameters[name] = str(value) if not isinstance(value, list) else value
        self._conditions: dict[str, bool] = {}

    # ---- intrinsics ------------------------------------------------------------------

    def condition(self, name: str) -> bool:
        if name not in self._conditions:
            self._conditions[name] = bool(self.eval(self.template["Conditions"][name]))
        return self._conditions[name]

    def ref(self, name: str) -> Any:
        if name == "AWS::NoValue":
            return NO_VALUE
        if name in PSEUDO:
            return PSEUDO[name]
        if name in self.parameters:
            return self.parameters[name]
        resource = self.template["Resources"][name]
        assert self.exists(name), f"Ref to {name}, which this stack does not create"
        del resource
        return f"<{name}>"

    def exists(self, resource: str) -> bool:
        condition = self.template["Resources"][resource].get("Condition")
        return condition is None or self.condition(condition)

    def eval(self, node: Any) -> Any:
        if isinstance(node, list):
            return [v for v in (self.eval(item) for item in node) if v is not NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((key, arg),) = node.items()
            intrinsic = self._intrinsics().get(key)
            if intrinsic is not None:
                return intrinsic(arg)
        result = {k: self.eval(v) for k, v in node.items()}
        return {k: v for k, v in result.items() if v is not NO_VALUE}

    def _intrinsics(self) -> dict[str, Callable[[Any], Any]]:
        """The intrinsic functions the template uses, by name, each given its argument."""
        return {
            "Ref": self.ref,
            "Condition": self.condition,
            "Fn::Condition": self.condition,
            "Fn::If": lambda arg: self.eval(arg[1] if self.condition(arg[0]) else arg[2]),
            "Fn::Equals": lambda arg: str(self.eval(arg[0])) == str(self.eval(arg[1])),
            "Fn::Not": lambda arg: not self.eval(arg[0]),
            "Fn::And": lambda arg: all(self.eval(a) for a in arg),
            "Fn::Or": lambda arg: any(self.eval(a) for a in arg),
            "Fn::Contains": self._contains,
            "Fn::Join": lambda arg: arg[0].join(str(v) for v in self.eval(arg[1])),
            "Fn::Select": lambda arg: self.eval(arg[1])[int(self.eval(arg[0]))],
            "Fn::Split": lambda arg: str(self.eval(arg[1])).split(arg[0]),
            "Fn::GetAtt": self._get_att,
            "Fn::Sub": self._sub,
        }

    def _contains(self, arg: list[Any]) -> bool:
        values, value = (self.eval(a) for a in arg)
        return value in values

    def _get_att(self, arg: str | list[str]) -> str:
        name = arg if isinstance(arg, str) else ".".join(arg)
        assert self.exists(name.split(".")[0]), f"GetAtt {name} of a resource this stack does not create"
        return ATTRIBUTES.get(name, f"<{name}>")

    def _sub(self, arg: str | list[Any]) -> str:
        text, variables = (arg, {}) if isinstance(arg, str) else arg
        values = {k: self.eval(v) for k, v in variables.items()}

        def substitute(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in values:
                return str(values[name])
            if "." in name and not name.startswith("AWS::"):
                return str(self.eval({"Fn::GetAtt": name}))
            return str(self.ref(name))

        return re.sub(r"\$\{([^}!]+)\}", substitute, text)

    # ---- what the tests ask ------------------------------------------------------------

    def environment(self, function: str) -> dict[str, str]:
        """Globals' variables merged with the function's own (the function's win), evaluated."""
        merged = dict(self.template["Globals"]["Function"]["Environment"]["Variables"])
        own = self.template["Resources"][function]["Properties"].get("Environment", {}).get("Variables", {})
        merged.update(own)
        return {k: str(v) for k, v in self.eval(merged).items()}

    def statements(self, function: str) -> list[dict[str, Any]]:
        """The IAM statements of a function's inline policies, evaluated."""
        found: list[dict[str, Any]] = []
        for policy in self.eval(self.template["Resources"][function]["Properties"].get("Policies", [])):
            if isinstance(policy, dict):
                found.extend(policy.get("Statement", []))
        return found

    def resources_for(self, function: str, action: str) -> list[str]:
        found: list[str] = []
        for statement in self.statements(function):
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if action in actions:
                resource = statement["Resource"]
                found.extend(resource if isinstance(resource, list) else [resource])
        return sorted(found)

    def properties(self, resource: str) -> dict[str, Any]:
        assert self.exists(resource), f"{resource} is not created in this mode"
        result: dict[str, Any] = self.eval(self.template["Resources"][resource]["Properties"])
        return result

    def failed_rules(self) -> list[str]:
        """The AssertDescription of every rule assertion these parameters break."""
        failed = []
        for rule in self.template.get("Rules", {}).values():
            if "RuleCondition" in rule and not self.eval(rule["RuleCondition"]):
                continue
            for assertion in rule["Assertions"]:
                if not self.eval(assertion["Assert"]):
                    failed.append(" ".join(str(assertion["AssertDescription"]).split()))
        return failed


def dbuser_arn(resource_id: str, user: str) -> str:
    return f"arn:{PARTITION}:rds-db:{REGION}:{ACCOUNT}:dbuser:{resource_id}/{user}"
