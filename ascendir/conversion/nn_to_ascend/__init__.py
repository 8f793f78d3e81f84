"""nn -> ascend: the `convert-nn-to-ascend` pass (convert_nn_to_ascend.py), the templates it
dispatches to (registry.py, templates/), the tiling model they obey (tiling.py) and the
builders they emit with (host_builder.py, kernel_builder.py). The whole lowering, with the
passes around it, is the `ascend-lowering` pipeline (ascendir/pipelines.py); `ascendir.driver.lower`
runs it."""
