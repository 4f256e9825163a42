variable "zone" { type = string }

resource "custom" "record" {
  type       = "Custom::DNSRecord"
  properties = { name = "web-${target.region}", zone = var.zone }
  timeout    = "2m"
}

# The provider's Data keys are attributes: custom.NAME.data.KEY.
resource "file" "hosts" {
  path    = "dns/hosts"
  content = "${custom.record.data.fqdn} ${custom.record.id}\n"
}

output "fqdn" { value = custom.record.data.fqdn }
