output "id" {
  value = local.id
}

output "tags" {
  value = local.tags
}
