# A label in the style of cloudposse/terraform-null-label: a normalized id
# and tags from a namespace, environment, name and attributes.
locals {
  parts = compact(concat([var.namespace, var.environment, var.name], var.attributes))
  clean = [for p in local.parts : replace(lower(p), "/[^a-z0-9]+/", "")]
  id    = join(var.delimiter, local.clean)
  tags = merge(var.tags, {
    Name        = local.id
    Environment = var.environment
  })
}
