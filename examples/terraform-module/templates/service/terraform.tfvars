name       = "Billing"
components = ["api", "worker"]
tags = {
  owner = "platform-team"
}
