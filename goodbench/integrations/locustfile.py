"""The locustfile `goodbench run --via locust` starts (`locust -f <this file>`): one concrete user."""

from goodbench.integrations.locust import GoodputUser


class GoodbenchUser(GoodputUser):
    pass
