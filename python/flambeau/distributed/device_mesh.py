"""init_device_mesh: ranks laid out in a 1-D or 2-D grid, one process group per row and column,
named dimensions (mesh["dp"]) as in torch.distributed.device_mesh."""
import math

__all__ = ["DeviceMesh", "init_device_mesh"]


class DeviceMesh:
    """A grid of global ranks. Each dimension has a group: the ranks that differ from this one
    only along it."""

    def __init__(self, device_type, mesh, mesh_dim_names=None, _groups=None):
        self.device_type = device_type
        self._mesh = [list(r) for r in mesh] if mesh and isinstance(mesh[0], (list, tuple)) else [list(mesh)]
        self._ndim = 2 if mesh and isinstance(mesh[0], (list, tuple)) else 1
        self.mesh_dim_names = tuple(mesh_dim_names) if mesh_dim_names else None
        self._groups = _groups or []

    @property
    def mesh(self):
        import flambeau
        return flambeau.tensor(self._mesh if self._ndim == 2 else self._mesh[0])

    @property
    def ndim(self):
        return self._ndim

    @property
    def shape(self):
        return (len(self._mesh), len(self._mesh[0])) if self._ndim == 2 else (len(self._mesh[0]),)

    def size(self, mesh_dim=None):
        return math.prod(self.shape) if mesh_dim is None else self.shape[self._dim(mesh_dim)]

    def _dim(self, d):
        if isinstance(d, str):
            if not self.mesh_dim_names or d not in self.mesh_dim_names:
                raise KeyError(f"[DeviceMesh] no mesh dimension named '{d}' (names: {self.mesh_dim_names})")
            return self.mesh_dim_names.index(d)
        if not 0 <= d < self._ndim:
            raise IndexError(f"[DeviceMesh] mesh dimension {d} is out of range for a {self._ndim}-D mesh")
        return d

    def get_group(self, mesh_dim=None):
        if mesh_dim is None:
            if self._ndim != 1:
                raise RuntimeError("[DeviceMesh.get_group] a 2-D mesh needs mesh_dim")
            mesh_dim = 0
        return self._groups[self._dim(mesh_dim)]

    def get_all_groups(self):
        return list(self._groups)

    def get_local_rank(self, mesh_dim=None):
        from flambeau import distributed as dist
        return self.get_group(mesh_dim).rank() if self._groups else dist.get_rank()

    def get_coordinate(self):
        from flambeau import distributed as dist
        me = dist.get_rank()
        for i, row in enumerate(self._mesh):
            if me in row:
                return [i, row.index(me)] if self._ndim == 2 else [row.index(me)]
        return None

    def __getitem__(self, names):
        """The sub-mesh of one named dimension (mesh["dp"])."""
        names = (names,) if isinstance(names, str) else tuple(names)
        if len(names) == self._ndim and all(isinstance(n, str) for n in names):
            return self
        if len(names) != 1:
            raise KeyError("[DeviceMesh] only one dimension can be sliced out")
        d = self._dim(names[0])
        coord = self.get_coordinate()
        if self._ndim == 1:
            return self
        line = [row[coord[1]] for row in self._mesh] if d == 0 else self._mesh[coord[0]]
        return DeviceMesh(self.device_type, line, (names[0],), [self._groups[d]])

    def __repr__(self):
        names = f", mesh_dim_names={self.mesh_dim_names}" if self.mesh_dim_names else ""
        return f"DeviceMesh('{self.device_type}', {self._mesh if self._ndim == 2 else self._mesh[0]}{names})"


def init_device_mesh(device_type, mesh_shape, *, mesh_dim_names=None, backend_override=None):
    """A mesh over all ranks of the default group (initialized if needed), in row-major order."""
    from flambeau import distributed as dist
    if not dist.is_initialized():
        dist.init_process_group()
    mesh_shape = tuple(mesh_shape)
    world = dist.get_world_size()
    if len(mesh_shape) not in (1, 2):
        raise ValueError(f"[init_device_mesh] meshes are 1-D or 2-D, got shape {mesh_shape}")
    if math.prod(mesh_shape) != world:
        raise ValueError(f"[init_device_mesh] mesh shape {mesh_shape} holds {math.prod(mesh_shape)} ranks but the "
                         f"world has {world}")
    if mesh_dim_names is not None and len(mesh_dim_names) != len(mesh_shape):
        raise ValueError(f"[init_device_mesh] {len(mesh_dim_names)} names for a {len(mesh_shape)}-D mesh")
    if len(mesh_shape) == 1:
        return DeviceMesh(device_type, list(range(world)), mesh_dim_names, [dist.GroupMember.WORLD])
    rows, cols = mesh_shape
    grid = [[r * cols + c for c in range(cols)] for r in range(rows)]
    me = dist.get_rank()
    # Every rank takes part in every split (a rank outside a line passes []).
    col_group = row_group = None
    tag = "_".join(mesh_dim_names) if mesh_dim_names else "mesh"
    for c in range(cols):
        line = [grid[r][c] for r in range(rows)]
        g = dist.new_group(line, group_desc=f"{tag}_dim0_{c}_{dist._State.group_count}")
        if me in line:
            col_group = g
    for r in range(rows):
        g = dist.new_group(grid[r], group_desc=f"{tag}_dim1_{r}_{dist._State.group_count}")
        if me in grid[r]:
            row_group = g
    return DeviceMesh(device_type, grid, mesh_dim_names, [col_group, row_group])
