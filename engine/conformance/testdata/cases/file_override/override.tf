output "o" {
  value = "${terraform_data.o.input.name}-${terraform_data.o.input.env}-${terraform_data.o.input.size}"
}
