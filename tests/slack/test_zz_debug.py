import json
from tests.slack.test_file_share import file_message
from tests.slack.conftest import local_runner, solution
async def test_dump(start):
    slack = await start(runner=local_runner())
    await slack.event(file_message("submit ranked identity", slack.fake.host_file("k.py", solution())))
    await slack.fake.wait_for(lambda: slack.fake.shared, timeout=60)
    await slack.settle()
    for c in slack.fake.calls:
        if c.method in ("chat.postMessage","chat.update"):
            print(c.method, json.dumps(c.params["blocks"], ensure_ascii=False))
    for f in slack.fake.shared: print(f["filename"], f["title"], f["content"][:300].decode())
