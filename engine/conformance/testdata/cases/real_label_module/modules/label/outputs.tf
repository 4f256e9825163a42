output "id" {
  value       = local.enabled ? local.id : ""
  description = "The label joined in label_order, shortened to id_length_limit with a hash."
}

output "tags" {
  value = local.enabled ? local.tags : {}
}

output "context" {
  value       = local.output_context
  description = "Pass it to another label as its context."
}
