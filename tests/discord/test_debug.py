from tests.discord.fake_discord import slash, FakeDiscord
from tests.discord.conftest import settled, ROOT

async def test_debug(adapter, fake: FakeDiscord, send):
    code = (ROOT / "leaderboards/identity/solutions/pytorch.py").read_bytes()
    send(slash(fake, "leaderboard", "submit", files={"file": ("pytorch.py", code)}, mode="ranked", gpu="cpu"))
    await fake.wait_for(lambda c: c.method == "POST" and c.path.startswith("/webhooks/"))
    await settled(adapter)
    for c in fake.calls:
        print(c.status, c.method, c.path, str(c.json)[:300], list(c.files))
