output "ids" {
  description = "The label of each component."
  value       = { for k, l in module.label : k => l.id }
}

output "workspace" {
  value = terraform.workspace
}
