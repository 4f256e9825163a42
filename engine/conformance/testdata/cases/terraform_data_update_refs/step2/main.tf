# An update of terraform_data's input keeps its id: what refers to the
# id is unchanged, what refers to output is updated.
variable "payload" {
  type    = string
  default = "two"
}

resource "terraform_data" "d" {
  input = var.payload
}

resource "terraform_data" "by_id" {
  input = terraform_data.d.id
}

resource "terraform_data" "by_output" {
  input = terraform_data.d.output
}

output "id_unchanged" { value = terraform_data.by_id.output == terraform_data.d.id }
