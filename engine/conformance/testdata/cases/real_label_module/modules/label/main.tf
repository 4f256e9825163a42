locals {
  defaults = {
    delimiter   = "-"
    label_order = ["namespace", "environment", "stage", "name", "attributes"]
    regex       = "/[^a-zA-Z0-9-]/"
  }

  enabled     = var.context.enabled
  delimiter   = coalesce(var.delimiter, var.context.delimiter, local.defaults.delimiter)
  label_order = coalesce(var.label_order, var.context.label_order, local.defaults.label_order)

  raw = {
    namespace   = var.namespace == null ? var.context.namespace : var.namespace
    environment = var.environment == null ? var.context.environment : var.environment
    stage       = var.stage == null ? var.context.stage : var.stage
    name        = var.name == null ? var.context.name : var.name
  }

  normalized = {
    for k, v in local.raw : k => v == null ? "" : lower(replace(v, local.defaults.regex, ""))
  }

  attributes = compact(distinct(concat(var.context.attributes, [for a in var.attributes : lower(a)])))

  labels = {
    namespace   = local.normalized.namespace
    environment = local.normalized.environment
    stage       = local.normalized.stage
    name        = local.normalized.name
    attributes  = join(local.delimiter, local.attributes)
  }

  id_full = join(local.delimiter, compact([for l in local.label_order : local.labels[l]]))
  id_hash = substr(md5(local.id_full), 0, 5)
  id = var.id_length_limit != 0 && length(local.id_full) > var.id_length_limit ? format(
    "%s%s%s", substr(local.id_full, 0, var.id_length_limit - 6), local.delimiter, local.id_hash
  ) : local.id_full

  generated_tags = {
    for k in ["namespace", "environment", "stage", "name"] :
    title(k) => local.labels[k] if local.labels[k] != ""
  }
  tags = merge(var.context.tags, local.generated_tags, var.tags, { Name = local.id })

  output_context = {
    enabled     = local.enabled
    namespace   = local.raw.namespace
    environment = local.raw.environment
    stage       = local.raw.stage
    name        = local.raw.name
    attributes  = local.attributes
    tags        = local.tags
    delimiter   = local.delimiter
    label_order = local.label_order
  }
}
