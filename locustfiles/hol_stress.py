"""Head-of-line stress under locust: workloads/hol-stress.toml in open-loop mode (its own arrival times),
so a long prefill lands among short streams exactly as the workload says.

    locust -f locustfiles/hol_stress.py --headless -u 64 -r 64 -t 60s --host http://127.0.0.1:8000
"""

import os

from goodbench.integrations.locust import GoodputUser

HERE = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("GOODBENCH_WORKLOAD", os.path.join(HERE, "..", "workloads", "hol-stress.toml"))
os.environ.setdefault("GOODBENCH_OPEN_LOOP", "true")


class HolUser(GoodputUser):
    pass
