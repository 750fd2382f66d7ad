from django.urls import path

from grelmicro.jwt.django import ready
from orders.views import Orders, Refunds

urlpatterns = [
    path("orders", Orders.as_view()),
    path("refunds", Refunds.as_view()),
    path("ready", ready),  # 200 once keys are loaded: the readiness probe
]
