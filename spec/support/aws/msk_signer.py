# The MSK IAM token AWS's own signer makes (aws-msk-iam-sasl-signer-python,
# on botocore), with fixed credentials, clock and user agent, for
# spec/sluice/auth/aws_msk_iam_spec.rb to compare sluice's with.
# argv: region access_key secret_key session_token|- yyyymmddThhmmssZ user_agent
# Prints the token, then its expiry (ms since the epoch).
import datetime
import sys

import aws_msk_iam_sasl_signer.MSKAuthTokenProvider as provider
import botocore.auth
from botocore.credentials import Credentials

region, access, secret, token, when, agent = sys.argv[1:7]
fixed = datetime.datetime.strptime(when, "%Y%m%dT%H%M%SZ")
botocore.auth.get_current_datetime = lambda *args, **kwargs: fixed
provider.__get_user_agent__ = lambda: agent
construct = getattr(provider, "__construct_auth_token")
signed, expiry = construct(region, Credentials(access, secret, None if token == "-" else token))
print(signed)
print(expiry)
