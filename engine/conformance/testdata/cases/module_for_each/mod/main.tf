variable "name" { type = string }
variable "members" { type = list(string) }

resource "terraform_data" "member" {
  for_each = toset(var.members)
  input    = "${var.name}/${each.key}"
}

output "summary" { value = "${var.name}: ${join(", ", sort(keys(terraform_data.member)))}" }
