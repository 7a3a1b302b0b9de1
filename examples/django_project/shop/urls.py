"""/order/<item>/ and /receipt/<result id>/."""

from __future__ import annotations

from django.urls import path

from shop.views import order, receipt

urlpatterns = [path("order/<str:item>/", order), path("receipt/<str:result_id>/", receipt)]
