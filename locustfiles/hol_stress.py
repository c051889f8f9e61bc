"""Head-of-line stress under locust: the built-in hol-stress workload in open-loop mode (its own
arrival times), so a long prefill lands among short streams exactly as the workload says.

    locust -f locustfiles/hol_stress.py --headless -u 64 -r 64 -t 60s --host http://127.0.0.1:8000
"""

import os

from goodbench.integrations.locust import GoodputUser

os.environ.setdefault("GOODBENCH_WORKLOAD", "hol-stress")  # the built-in workload
os.environ.setdefault("GOODBENCH_OPEN_LOOP", "true")


class HolUser(GoodputUser):
    pass
