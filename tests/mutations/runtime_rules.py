"""The mutation gate's entries for the runtime:
routing and delivery, admission and the lease, create and close
(and their 47/48 targets), the ceiling, idle eviction and the lanes.

Each entry is a :class:`~mutation.Mutation`; see ``catalog.py``.
"""

from __future__ import annotations

from mutation import Mutation

__all__ = ("RUNTIME_RULES",)

RUNTIME_RULES: tuple[Mutation, ...] = (
    Mutation(
        name="M1",
        family="Direct calls: send / request, one deadline, no hidden retry (06 §4, §5)",
        rule="A message is never delivered to a local instance whose generation the store "
             "no longer names.",
        path="zlink_trio/runtime/coordinators/routing.py",
        find="if host is None or host.generation != record.object_generation:",
        replace="if host is None:",
        guards=["tests/runtime/test_spec_06.py"],
    ),
    # Mesh-wide (several listening nodes)
    Mutation(
        name="M5",
        family="Route cache and Message Follow routes (06 §6)",
        rule="A node waiting for another node's Creating Spot polls the store with a "
             "backoff from 5 ms to 250 ms, so it sees Ready (and is routed there) at once.",
        path="zlink_trio/runtime/coordinators/routing.py",
        find="_FIRST_POLL: Final = 0.005\n_MAX_POLL: Final = 0.25\n",
        replace="_FIRST_POLL: Final = 15.0\n_MAX_POLL: Final = 15.0\n",
        guards=["tests/runtime/test_spec_06_cross_node.py::"
                "test_missing_creating_and_store_failure_are_not_negative_"
                "cached_creating_third_node"],
    ),
    Mutation(
        name="mesh.creating_poll_cap",
        family="Route cache and Message Follow routes (06 §6)",
        rule="The Creating poll's backoff stops growing at 250 ms, however long the Spot "
             "stays Creating.",
        path="zlink_trio/runtime/coordinators/routing.py",
        find="_MAX_POLL: Final = 0.25\n",
        replace="_MAX_POLL: Final = 15.0\n",
        guards=["tests/runtime/test_spec_06_cross_node.py::"
                "test_missing_creating_and_store_failure_are_not_negative_"
                "cached_creating_third_node"],
    ),
    Mutation(
        name="mesh.type_from_every_descriptor",
        family="Cold activation (06 §4.1, §4.1.1, §4.2)",
        rule="An omitted Instance type is auto-selected from the types every serving node "
             "of the Mesh registers, not from this node's own registry.",
        path="zlink_trio/runtime/coordinators/placement.py",
        find="        stable_type = select_instance_type(found, mesh, intent.stable_type)\n"
             "    except NotFound:\n",
        replace="        stable_type = select_instance_type(\n"
                "            [c for c in found if c.node_rid == rt.node_rid] or found, mesh,\n"
                "            intent.stable_type)\n"
                "    except NotFound:\n",
        guards=["tests/runtime/test_spec_06_cross_node.py::"
                "test_instance_type_auto_selected_only_when_mesh_has_exactly_one"],
    ),
    Mutation(
        name="mesh.user_type_from_every_descriptor",
        family="User Spot Create / GetOrCreate (06 §3, §3.1\u20133.3)",
        rule="Create checks the stable type against every serving node of the Mesh, so a "
             "node that does not register it (a client) still creates it on one that does.",
        path="zlink_trio/runtime/coordinators/create.py",
        find="        select_user_type(found, mesh, op.stable_type)\n",
        replace="        select_user_type(\n"
                "            [c for c in found if c.node_rid == rt.node_rid] or found, mesh,\n"
                "            op.stable_type)\n",
        guards=["tests/runtime/test_spec_06_cross_node.py::"
                "test_instance_intent_cold_activates_only_missing_spot_with_"
                "optional_mesh_and_type"],
    ),
    Mutation(
        name="mesh.candidates_keep_their_mesh",
        family="Cold activation (06 §4.1, §4.1.1, §4.2)",
        rule="Placement sees each node in its own Mesh: with two object Meshes and no "
             "in_mesh, cold activation and create are InvalidOperation.",
        path="zlink_trio/runtime/coordinators/placement.py",
        find="            mesh=descriptor.mesh, node_rid=descriptor.node_rid,",
        replace="            mesh=rt.mesh, node_rid=descriptor.node_rid,",
        guards=["tests/runtime/test_spec_06_cross_node.py::"
                "test_instance_intent_cold_activates_only_missing_spot_with_"
                "optional_mesh_and_type"],
    ),
)
