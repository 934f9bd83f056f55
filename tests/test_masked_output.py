"""What the CLI prints goes through the secret masking, and `--json` output stays one document."""

from __future__ import annotations

import io
import json

import click
from click.testing import CliRunner

from connector.cli.masked_output import MaskingWriter, mask_standard_streams
from connector.secrets import register_secret


def test_everything_a_command_prints_is_masked_on_stdout_and_stderr() -> None:
    register_secret("tok-printed-6620-cli")

    @click.command()
    def report() -> None:
        mask_standard_streams()
        click.echo("sent with tok-printed-6620-cli")
        click.echo("refused: tok%2Dprinted%2D6620%2Dcli", err=True)

    result = CliRunner().invoke(report)

    assert result.output == "sent with ***\nrefused: ***\n"


def test_a_json_document_stays_valid_when_a_secret_is_one_of_its_numbers() -> None:
    register_secret("424242")
    written = io.StringIO()
    document = {"requests": 424242, "message": "password 424242 refused", "ok": True}

    MaskingWriter(written).write(json.dumps(document) + "\n")

    assert json.loads(written.getvalue()) == {
        "requests": "***",
        "message": "password *** refused",
        "ok": True,
    }
    assert written.getvalue().endswith("}\n")


def test_the_masking_stream_offers_no_binary_buffer_to_write_around_it() -> None:
    writer = MaskingWriter(io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))

    assert not hasattr(writer, "buffer")
    assert writer.encoding == "utf-8"
