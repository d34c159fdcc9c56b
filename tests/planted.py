"""Secrets planted in run files by the safety tests, one of each kind a training box holds, built from parts
so that no scanner flags the test files themselves (holds no tests)."""

from __future__ import annotations

HF_TOKEN = "hf_" + "Qa9Zk3Lm0Pq7Rs2Tu5Vw8Xy1Ab4Cd6Ef9G"
WANDB_KEY = "3f786850e387550fdab836ed7e6dc881" + "de23001b"


def planted_secrets(token_in_use: str) -> dict[str, tuple[str, str]]:
    """Each kind of secret → (a planted value, how a refusal names it); `token_in_use` is the push's token."""
    return {
        "hf": (HF_TOKEN, "a Hugging Face token"),
        "hf_org": (
            "api_org_" + "Qa9Zk3Lm0Pq7Rs2Tu5Vw8Xy1Ab4Cd6Ef9G",
            "a Hugging Face organization API token",
        ),
        "token_in_use": (token_in_use, "the Hugging Face token in use"),
        "wandb": ("WANDB_API_KEY=" + WANDB_KEY, "a W&B API key"),
        "netrc": ("machine api.wandb.ai login me password " + WANDB_KEY, "a W&B API key"),
        "aws": ("AKIA" + "IOSFODNN7EXAMPLQ", "an AWS access key id"),
        "openai": ("sk-" + "proj-Qa9Zk3Lm0Pq7Rs2Tu5Vw8Xy1Ab4Cd6Ef9GQa9Zk3Lm0", "an OpenAI API key"),
        "openai_legacy": ("sk-" + "Qa9Zk3Lm0Pq7Rs2Tu5Vw8T3BlbkFJXy1Ab4Cd6Ef9GQ", "an OpenAI API key"),
        "anthropic": ("sk-" + "ant-api03-Qa9Zk3Lm0Pq7Rs2Tu5Vw8Xy1Ab4Cd6Ef9G-AA", "an Anthropic API key"),
        "hf_glued": ("token" + HF_TOKEN, "a Hugging Face token"),
        "github": ("ghp_" + "Qa9Zk3Lm0Pq7Rs2Tu5Vw8Xy1Ab4Cd6Ef9GHj", "a GitHub token"),
        "gitlab": ("glpat-" + "Qa9Zk3Lm0Pq7Rs2Tu5Vw", "a GitLab token"),
        "slack": ("xoxb-" + "123456789012-1234567890123-Qa9Zk3Lm0Pq7Rs2Tu5Vw8Xy", "a Slack token"),
        "google": ("AIza" + "SyQa9Zk3Lm0Pq7Rs2Tu5Vw8Xy1Ab4Cd6Ef9G", "a Google API key"),
        "jwt": (
            "eyJ"
            + "hbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "a JSON Web Token",
        ),
        "bearer": ("Authorization: Bearer " + "Qa9Zk3Lm0Pq7Rs2Tu5Vw8Xy1Ab4Cd6", "a bearer token"),
        "url_password": ("https://me:" + "s3cretPassw0rd@models.example.org/x", "a password in a URL"),
        "telegram": ("123456789:" + "AAQa9Zk3Lm0Pq7Rs2Tu5Vw8Xy1Ab4Cd6Ef9", "a Telegram bot token"),
        "private_key": (
            "-----BEGIN OPENSSH " + "PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5v\n",
            "a private key block",
        ),
    }
