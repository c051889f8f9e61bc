"""Goodput load test for any goodbench workload.

    locust -f locustfiles/goodput.py --headless -u 32 -r 8 -t 60s --host http://127.0.0.1:8000 \
        --goodbench-workload mixed-long-short --goodbench-slo "ttft:500 tpot:50"

Distributed: the same command with --master --expect-workers N, and `locust -f locustfiles/goodput.py
--worker --master-host MASTER` on each worker machine. At the end the master writes a goodbench results
directory and exits 1 when SLO attainment is below --goodbench-min-attainment (default 0.95).
"""

from goodbench.integrations.locust import GoodputUser


class ChatUser(GoodputUser):
    pass
