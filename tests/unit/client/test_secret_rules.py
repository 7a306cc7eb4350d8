"""sluiceway.common.secrets: which keys are secret, URL credentials redacted, whole configs masked."""

from __future__ import annotations

import pytest

from sluiceway.common.secrets import HIDDEN, looks_secret, masked_config, redact_url_credentials


@pytest.mark.parametrize(
    "key",
    [
        "connection.password",
        "password",
        "db.passwd",
        "db.pwd",
        "ssl.key.password",
        "producer.override.ssl.keystore.password",
        "consumer.override.sasl.jaas.config",
        "sasl.jaas.config",
        "sasl.password",
        "sasl.oauthbearer.client.secret",
        "client.secret",
        "aws.secret.access.key",
        "key.converter.basic.auth.user.info",
        "schema.registry.basic.auth.user.info",
        "replica.auth.token",
        "github.access.token",
        "gcp.credentials.json",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.truststore.certificates",
        "ssl.key.pem",
        "admin.override.ssl.key.pem",
        "datadog.api.key",
        "private.key",
        "ssh.passphrase",
    ],
)
def test_secret_keys(key: str) -> None:
    assert looks_secret(key)


@pytest.mark.parametrize(
    "key",
    [
        "topics",
        "connection.url",
        "connection.user",
        "file",
        "tasks.max",
        "key.converter",
        "sasl.mechanism",
        "sasl.oauthbearer.token.endpoint.url",
        "auth.tokens.file",
        "ssl.keystore.location",
        "ssl.keystore.type",
        "tls.key.file",
        "config.providers",
        "config.providers.env.param.allowlist.pattern",
        "config.providers.file.param.allowed.paths",
        "aws.credentials.provider.class",
        "password.encoder.cipher.algorithm",
    ],
)
def test_keys_that_are_not_secret(key: str) -> None:
    assert not looks_secret(key)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("jdbc:postgresql://user:pw@host/db", f"jdbc:postgresql://user:{HIDDEN}@host/db"),
        ("mongodb+srv://u:p4ss@cluster.example/?w=1", f"mongodb+srv://u:{HIDDEN}@cluster.example/?w=1"),
        ("redis://:s3cr@t@cache:6379/0", f"redis://:{HIDDEN}@cache:6379/0"),
        ("see http://a:b@h1 and https://c:d@h2/x", f"see http://a:{HIDDEN}@h1 and https://c:{HIDDEN}@h2/x"),
        ("jdbc:oracle:thin:scott/tiger@db:1521/orcl", f"jdbc:oracle:thin:scott/{HIDDEN}@db:1521/orcl"),
        ("http://h/p?user=a&password=b&x=1", f"http://h/p?user=a&password={HIDDEN}&x=1"),
        (
            "jdbc:sqlserver://h;user=sa;password=S3c;db=x",
            f"jdbc:sqlserver://h;user=sa;password={HIDDEN};db=x",
        ),
        ("https://h/cb?access_token=abc", f"https://h/cb?access_token={HIDDEN}"),
        ('{"url": "http://u:p@h"}', '{"url": "http://u:' + HIDDEN + '@h"}'),
    ],
)
def test_url_credentials_are_redacted(text: str, expected: str) -> None:
    assert redact_url_credentials(text) == expected
    assert redact_url_credentials(expected) == expected  # idempotent


@pytest.mark.parametrize(
    "text",
    [
        "jdbc:postgresql://host:5432/db",
        "postgresql://user@host/db",
        "http://host:8080/path@version",
        "user@example.com wrote a:b",
        "plain text with password in it",
        # A config provider reference is no secret: reads show it.
        "jdbc:postgresql://user:${env:DB_PASSWORD}@host/db",
    ],
)
def test_text_without_credentials_is_kept(text: str) -> None:
    assert redact_url_credentials(text) == text


def test_masked_config_hides_secret_keys_and_url_credentials() -> None:
    config = {
        "connection.url": "jdbc:mysql://app:pw@db/x",
        "connection.password": "pw",
        "custom": "visible",
        "token.like": "t",
    }
    assert masked_config(config, {"custom"}) == {
        "connection.url": f"jdbc:mysql://app:{HIDDEN}@db/x",
        "connection.password": HIDDEN,
        "custom": HIDDEN,
        "token.like": HIDDEN,
    }
