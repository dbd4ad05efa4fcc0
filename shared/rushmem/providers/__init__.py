"""What the providers share: the OpenAI-compatible HTTP client (:mod:`.http`), the Bedrock
runtime client (:mod:`.bedrock`), the one retry policy both follow (:mod:`.retry`) and the AWS
calls for secrets and RDS tokens (:mod:`.aws`).

Only provider modules speak HTTP or boto3; each imports its SDK lazily.
"""
