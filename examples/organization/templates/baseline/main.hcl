variable "retention_days" { type = number }
variable "alert_email" { type = string }

resource "file" "logging" {
  path    = "baseline/logging.conf"
  content = "ou=${target.ou}\naccount=${target.account}\nregion=${target.region}\nretention_days=${var.retention_days}\n"
}

resource "file" "alerts" {
  path    = "baseline/alerts.conf"
  content = "email=${var.alert_email}\n"
}
