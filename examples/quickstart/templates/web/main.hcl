variable "image" {
  type = string
}

variable "replicas" {
  type    = number
  default = 1
}

variable "api_key" {
  type      = string
  sensitive = true
}

locals {
  name = "web-${target.region}"
}

# The service configuration of this instance.
resource "file" "config" {
  path    = "web/app.conf"
  content = <<-EOT
    name=${local.name}
    account=${target.account}
    image=${var.image}
    replicas=${var.replicas}
  EOT
}

# The API key, kept out of every plan and status document.
resource "file" "credentials" {
  path    = "web/credentials"
  content = "api_key=${var.api_key}\n"
  mode    = "0600"
}

# One file per replica; count follows the variable.
resource "file" "replica" {
  count   = var.replicas
  path    = "web/replicas/${count.index}.conf"
  content = "replica=${count.index}\nconfig_sha256=${file.config.sha256}\n"
}

# A command whose JSON output becomes attributes.
resource "command" "register" {
  create     = "printf '{\"endpoint\":\"https://%s.%s.web.example\"}' \"$STACKD_REGION\" \"$STACKD_ACCOUNT\""
  delete     = "true"
  depends_on = [file.config]
}

output "endpoint" {
  value = command.register.endpoint
}

output "config_sha256" {
  value = file.config.sha256
}
