terraform {
  required_providers {
    local  = { source = "hashicorp/local", version = "~> 2.5" }
    random = { source = "hashicorp/random", version = "~> 3.6" }
  }
}

variable "root" { type = string }

# Providers are configured per target; neither of these needs settings.
# With hashicorp/aws this is where the StackSets execution-role model goes:
#   provider "aws" {
#     region = target.region
#     assume_role { role_arn = "arn:aws:iam::${target.account}:role/stackd-execution" }
#   }
provider "local" {}

resource "random_id" "instance" {
  byte_length = 4
}

resource "local_file" "config" {
  filename        = "${var.root}/${target.account}/${target.region}/app.conf"
  content         = "region=${target.region}\naccount=${target.account}\nid=${random_id.instance.hex}\n"
  file_permission = "0644"
}

resource "local_sensitive_file" "key" {
  filename = "${var.root}/${target.account}/${target.region}/key"
  content  = "key-for-${random_id.instance.hex}"
}

data "local_file" "readback" {
  filename = local_file.config.filename
}

output "config_sha256" { value = local_file.config.content_sha256 }
output "readback" { value = data.local_file.readback.content }
