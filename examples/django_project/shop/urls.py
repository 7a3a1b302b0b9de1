"""One URL: /order/<item>/."""

from __future__ import annotations

from django.urls import path

from shop.views import order

urlpatterns = [path("order/<str:item>/", order)]
