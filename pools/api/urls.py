from django.urls import path

from . import views

urlpatterns = [
    path("configs/history/", views.HistoryView.as_view(), name="config-history"),
    path("configs/history/rollback/", views.RollbackView.as_view(), name="config-rollback"),
    path("configs/history/diff/", views.DiffView.as_view(), name="config-diff"),
    path("configs/<slug:kind>/", views.ConfigDocumentView.as_view(), name="config-documents"),
    path("configs/<slug:kind>/<str:name>/", views.ConfigDocumentView.as_view(), name="config-document"),
]
