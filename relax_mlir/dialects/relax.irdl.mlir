// The relax dialect: one op per lowered Relax op, on builtin tensors.
// GENERATED from the op registry by relax_mlir.backend.dialect_gen: do not edit. Regenerate with
//   python -m relax_mlir.backend.dialect_gen --write
// relax.nn.relu is `relax.nn_relu` (IRDL op names allow only [a-z0-9_]); see relax_mlir/dialects/README.md.
// registry sha256 c3af62d7e8ccf732ca337dcfef4b192d15d6b68bdceccd3b967119049688046d
irdl.dialect @relax {
  // relax.add: Elementwise add with broadcasting.
  irdl.operation @add {
    %in_x1 = irdl.base "!builtin.tensor"
    %in_x2 = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x1: %in_x1, x2: %in_x2)
    irdl.results(result: %out)
  }

  // relax.subtract: Elementwise subtract with broadcasting.
  irdl.operation @subtract {
    %in_x1 = irdl.base "!builtin.tensor"
    %in_x2 = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x1: %in_x1, x2: %in_x2)
    irdl.results(result: %out)
  }

  // relax.multiply: Elementwise multiply with broadcasting.
  irdl.operation @multiply {
    %in_x1 = irdl.base "!builtin.tensor"
    %in_x2 = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x1: %in_x1, x2: %in_x2)
    irdl.results(result: %out)
  }

  // relax.divide: Elementwise division; on integers it truncates toward zero (by zero: 0, as NumPy's).
  irdl.operation @divide {
    %in_x1 = irdl.base "!builtin.tensor"
    %in_x2 = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x1: %in_x1, x2: %in_x2)
    irdl.results(result: %out)
  }

  // relax.floor_divide: Elementwise floor_divide with broadcasting.
  irdl.operation @floor_divide {
    %in_x1 = irdl.base "!builtin.tensor"
    %in_x2 = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x1: %in_x1, x2: %in_x2)
    irdl.results(result: %out)
  }

  // relax.power: Elementwise power with broadcasting.
  irdl.operation @power {
    %in_x1 = irdl.base "!builtin.tensor"
    %in_x2 = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x1: %in_x1, x2: %in_x2)
    irdl.results(result: %out)
  }

  // relax.maximum: Elementwise maximum with broadcasting.
  irdl.operation @maximum {
    %in_x1 = irdl.base "!builtin.tensor"
    %in_x2 = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x1: %in_x1, x2: %in_x2)
    irdl.results(result: %out)
  }

  // relax.minimum: Elementwise minimum with broadcasting.
  irdl.operation @minimum {
    %in_x1 = irdl.base "!builtin.tensor"
    %in_x2 = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x1: %in_x1, x2: %in_x2)
    irdl.results(result: %out)
  }

  // relax.mod: The remainder of the division truncated toward zero (C's ``fmod``; TVM's ``mod``): the sign of ``x1``; integers by zero give 0.
  irdl.operation @mod {
    %in_x1 = irdl.base "!builtin.tensor"
    %in_x2 = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x1: %in_x1, x2: %in_x2)
    irdl.results(result: %out)
  }

  // relax.floor_mod: The remainder of the floor division (Python's ``%``; TVM's ``floor_mod``): the sign of ``x2``; integers by zero give 0.
  irdl.operation @floor_mod {
    %in_x1 = irdl.base "!builtin.tensor"
    %in_x2 = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x1: %in_x1, x2: %in_x2)
    irdl.results(result: %out)
  }

  // relax.atan2: The angle of the point ``(x2, x1)``: ``atan2(x1, x2)`` in ``[-pi, pi]`` with the quadrant from both signs (TVM's ``atan2(x1, x2)``, NumPy's ``arctan2``; signed zeros and infinities as C's).
  irdl.operation @atan2 {
    %in_x1 = irdl.base "!builtin.tensor"
    %in_x2 = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x1: %in_x1, x2: %in_x2)
    irdl.results(result: %out)
  }

  // relax.equal: Elementwise equal with broadcasting.
  irdl.operation @equal {
    %in_x1 = irdl.base "!builtin.tensor"
    %in_x2 = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x1: %in_x1, x2: %in_x2)
    irdl.results(result: %out)
  }

  // relax.not_equal: Elementwise not_equal with broadcasting.
  irdl.operation @not_equal {
    %in_x1 = irdl.base "!builtin.tensor"
    %in_x2 = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x1: %in_x1, x2: %in_x2)
    irdl.results(result: %out)
  }

  // relax.less: Elementwise less with broadcasting.
  irdl.operation @less {
    %in_x1 = irdl.base "!builtin.tensor"
    %in_x2 = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x1: %in_x1, x2: %in_x2)
    irdl.results(result: %out)
  }

  // relax.less_equal: Elementwise less_equal with broadcasting.
  irdl.operation @less_equal {
    %in_x1 = irdl.base "!builtin.tensor"
    %in_x2 = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x1: %in_x1, x2: %in_x2)
    irdl.results(result: %out)
  }

  // relax.greater: Elementwise greater with broadcasting.
  irdl.operation @greater {
    %in_x1 = irdl.base "!builtin.tensor"
    %in_x2 = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x1: %in_x1, x2: %in_x2)
    irdl.results(result: %out)
  }

  // relax.greater_equal: Elementwise greater_equal with broadcasting.
  irdl.operation @greater_equal {
    %in_x1 = irdl.base "!builtin.tensor"
    %in_x2 = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x1: %in_x1, x2: %in_x2)
    irdl.results(result: %out)
  }

  // relax.where: ``condition ? x1 : x2`` elementwise, with broadcasting of all three.
  irdl.operation @where {
    %in_condition = irdl.base "!builtin.tensor"
    %in_x1 = irdl.base "!builtin.tensor"
    %in_x2 = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(condition: %in_condition, x1: %in_x1, x2: %in_x2)
    irdl.results(result: %out)
  }

  // relax.reshape: Reshape to ``shape`` (same number of elements); one dim may be -1 and is inferred, symbolically too: ``reshape(x: (n, 28, 28), (-1, 784))`` has shape ``(n, 784)``.
  irdl.operation @reshape {
    %in_x = irdl.base "!builtin.tensor"
    %index = irdl.is index
    %out = irdl.base "!builtin.tensor"
    %attr_shape = irdl.base "#builtin.dense_array"
    irdl.operands(x: %in_x, dims: variadic %index)
    irdl.results(result: %out)
    irdl.attributes {"shape" = %attr_shape}
  }

  // relax.permute_dims: Permute the axes: output axis ``i`` is input axis ``axes[i]``; ``axes=None`` reverses them.
  irdl.operation @permute_dims {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_axes = irdl.any
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
    irdl.attributes {"axes" = %attr_axes}
  }

  // relax.expand_dims: Insert size-1 axes at the positions ``axis`` (an int or a tuple), counted in the output's rank.
  irdl.operation @expand_dims {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_axis = irdl.base "#builtin.dense_array"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
    irdl.attributes {"axis" = %attr_axis}
  }

  // relax.squeeze: Remove the size-1 axes ``axis`` (an int or a tuple), or all size-1 axes when ``axis`` is None (then a symbolic input shape gives an output of unknown rank, as in TVM).
  irdl.operation @squeeze {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_axis = irdl.any
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
    irdl.attributes {"axis" = %attr_axis}
  }

  // relax.flatten: Flatten all dimensions into one (TVM's ``relax.flatten``): ``(n, 28, 28)`` -> ``(n * 784,)``; a 0-d tensor becomes ``(1,)``.
  irdl.operation @flatten {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.broadcast_to: Broadcast ``x`` to ``shape`` with NumPy's rules (input dims align right; each is 1 or equal).
  irdl.operation @broadcast_to {
    %in_x = irdl.base "!builtin.tensor"
    %index = irdl.is index
    %out = irdl.base "!builtin.tensor"
    %attr_shape = irdl.base "#builtin.dense_array"
    irdl.operands(x: %in_x, dims: variadic %index)
    irdl.results(result: %out)
    irdl.attributes {"shape" = %attr_shape}
  }

  // relax.concat: Join a tuple of tensors along ``axis`` (``None``: flatten them first, as NumPy does; TVM takes only 1-D tensors there).
  irdl.operation @concat {
    %in_tensors = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_axis = irdl.any
    irdl.operands(tensors: variadic %in_tensors)
    irdl.results(result: %out)
    irdl.attributes {"axis" = %attr_axis}
  }

  // relax.zeros: A tensor of zeros: ``R.zeros((n, 4), "float32")``; the shape may name size variables.
  irdl.operation @zeros {
    %index = irdl.is index
    %out = irdl.base "!builtin.tensor"
    %attr_shape = irdl.base "#builtin.dense_array"
    %attr_dtype = irdl.base "#builtin.type"
    irdl.operands(dims: variadic %index)
    irdl.results(result: %out)
    irdl.attributes {"shape" = %attr_shape, "dtype" = %attr_dtype}
  }

  // relax.ones: A tensor of ones: ``R.ones((), "float32")``; the shape may name size variables.
  irdl.operation @ones {
    %index = irdl.is index
    %out = irdl.base "!builtin.tensor"
    %attr_shape = irdl.base "#builtin.dense_array"
    %attr_dtype = irdl.base "#builtin.type"
    irdl.operands(dims: variadic %index)
    irdl.results(result: %out)
    irdl.attributes {"shape" = %attr_shape, "dtype" = %attr_dtype}
  }

  // relax.full: A tensor filled with ``fill_value``; ``dtype`` defaults to the fill value's (bool, int32 or float32, as ``R.const``).
  irdl.operation @full {
    %index = irdl.is index
    %out = irdl.base "!builtin.tensor"
    %attr_shape = irdl.base "#builtin.dense_array"
    %attr_fill_value = irdl.any
    %attr_dtype = irdl.any
    irdl.operands(dims: variadic %index)
    irdl.results(result: %out)
    irdl.attributes {"shape" = %attr_shape, "fill_value" = %attr_fill_value, "dtype" = %attr_dtype}
  }

  // relax.zeros_like: Zeros with the shape of ``x`` and its dtype unless ``dtype`` is given.
  irdl.operation @zeros_like {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_dtype = irdl.any
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
    irdl.attributes {"dtype" = %attr_dtype}
  }

  // relax.ones_like: Ones with the shape of ``x`` and its dtype unless ``dtype`` is given.
  irdl.operation @ones_like {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_dtype = irdl.any
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
    irdl.attributes {"dtype" = %attr_dtype}
  }

  // relax.full_like: ``fill_value`` everywhere, with the shape of ``x`` and its dtype unless ``dtype`` is given (as TVM, the dtype of ``x``, not of the fill value).
  irdl.operation @full_like {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_fill_value = irdl.any
    %attr_dtype = irdl.any
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
    irdl.attributes {"fill_value" = %attr_fill_value, "dtype" = %attr_dtype}
  }

  // relax.triu: Keep the upper triangle of the last two dims (on and above diagonal ``k``; ``k > 0`` is above the main diagonal) and zero the rest.
  irdl.operation @triu {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_k = irdl.base "#builtin.integer"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
    irdl.attributes {"k" = %attr_k}
  }

  // relax.tril: Keep the lower triangle of the last two dims (on and below diagonal ``k``; ``k > 0`` is above the main diagonal) and zero the rest.
  irdl.operation @tril {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_k = irdl.base "#builtin.integer"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
    irdl.attributes {"k" = %attr_k}
  }

  // relax.arange: ``[start, start + step, ...)`` up to ``end`` (exclusive): ``ceil((end - start) / step)`` values; ``arange(n)`` counts from 0.
  irdl.operation @arange {
    %index = irdl.is index
    %out = irdl.base "!builtin.tensor"
    %attr_start = irdl.any
    %attr_end = irdl.any
    %attr_step = irdl.any
    %attr_dtype = irdl.any
    irdl.operands(dims: variadic %index)
    irdl.results(result: %out)
    irdl.attributes {"start" = %attr_start, "end" = %attr_end, "step" = %attr_step, "dtype" = %attr_dtype}
  }

  // relax.abs: Elementwise abs.
  irdl.operation @abs {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.negative: Elementwise negative.
  irdl.operation @negative {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.exp: Elementwise exp.
  irdl.operation @exp {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.log: Elementwise log.
  irdl.operation @log {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.sqrt: Elementwise sqrt.
  irdl.operation @sqrt {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.rsqrt: Elementwise rsqrt.
  irdl.operation @rsqrt {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.sin: Elementwise sin.
  irdl.operation @sin {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.cos: Elementwise cos.
  irdl.operation @cos {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.tanh: Elementwise tanh.
  irdl.operation @tanh {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.sigmoid: Elementwise sigmoid.
  irdl.operation @sigmoid {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.square: Elementwise square.
  irdl.operation @square {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.erf: Elementwise erf.
  irdl.operation @erf {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.floor: Round down; integers are unchanged.
  irdl.operation @floor {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.ceil: Round up; integers are unchanged.
  irdl.operation @ceil {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.round: Round to the nearest integer, halves to even (NumPy's ``round``; TVM's ``round`` is LLVM's ``nearbyint``, the same); integers are unchanged.
  irdl.operation @round {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.sign: ``-1``, ``0`` or ``1`` by the sign of each element (NaN stays NaN, ``-0.0`` gives ``0.0``, as NumPy); integers allowed.
  irdl.operation @sign {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.trunc: Round toward zero; integers are unchanged.
  irdl.operation @trunc {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.tan: Elementwise tan.
  irdl.operation @tan {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.asin: Elementwise asin.
  irdl.operation @asin {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.acos: Elementwise acos.
  irdl.operation @acos {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.atan: Elementwise atan.
  irdl.operation @atan {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.sinh: Elementwise sinh.
  irdl.operation @sinh {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.cosh: Elementwise cosh.
  irdl.operation @cosh {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.asinh: Elementwise asinh.
  irdl.operation @asinh {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.acosh: Elementwise acosh.
  irdl.operation @acosh {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.atanh: Elementwise atanh.
  irdl.operation @atanh {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.log2: Elementwise log2.
  irdl.operation @log2 {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.log10: Elementwise log10.
  irdl.operation @log10 {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.log1p: Elementwise log1p.
  irdl.operation @log1p {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.astype: Convert the elements to ``dtype`` (floats to ints truncate toward zero, as C and NumPy do).
  irdl.operation @astype {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_dtype = irdl.base "#builtin.type"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
    irdl.attributes {"dtype" = %attr_dtype}
  }

  // relax.clip: Clamp every element to ``[min, max]``; the gradient passes where ``min <= x <= max``.
  irdl.operation @clip {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_min = irdl.any
    %attr_max = irdl.any
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
    irdl.attributes {"min" = %attr_min, "max" = %attr_max}
  }

  // relax.fast_tanh: ``tanh`` by a vectorizable rational approximation (within 4.0e-7 in float32); see ``relax_mlir.op.fast_math``.
  irdl.operation @fast_tanh {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.fast_erf: ``erf`` by a vectorizable rational approximation (within 4.8e-7 in float32); see ``relax_mlir.op.fast_math``.
  irdl.operation @fast_erf {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.take: Gather along ``axis`` (``None``: of the flattened tensor) as ``numpy.take``: the output shape is ``x.shape[:axis] + indices.shape + x.shape[axis+1:]``.
  irdl.operation @take {
    %in_x = irdl.base "!builtin.tensor"
    %in_indices = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_axis = irdl.any
    %attr_mode = irdl.base "#builtin.string"
    irdl.operands(x: %in_x, indices: %in_indices)
    irdl.results(result: %out)
    irdl.attributes {"axis" = %attr_axis, "mode" = %attr_mode}
  }

  // relax.strided_slice: Slice ``x[begin:end:stride]`` along each of ``axes``, with Python's clamping of out-of-range indices and negative strides; on a symbolic axis the indices are assumed in bounds (as TVM's ``assume_inbound``), except a static one at least 2**31 - 1 in size, which means past the end (positive) or before the start (negative) of the axis, as NumPy reads it on any axis of fewer elements: a call on a longer axis, where NumPy's slice has another length, raises ``ValueError`` (use +-(2**63 - 1) there).
  irdl.operation @strided_slice {
    %in_x = irdl.base "!builtin.tensor"
    %index = irdl.is index
    %out = irdl.base "!builtin.tensor"
    %attr_axes = irdl.base "#builtin.dense_array"
    %attr_begin = irdl.base "#builtin.dense_array"
    %attr_end = irdl.base "#builtin.dense_array"
    %attr_strides = irdl.any
    %attr_assume_inbound = irdl.base "#builtin.integer"
    irdl.operands(x: %in_x, dims: variadic %index)
    irdl.results(result: %out)
    irdl.attributes {"axes" = %attr_axes, "begin" = %attr_begin, "end" = %attr_end, "strides" = %attr_strides, "assume_inbound" = %attr_assume_inbound}
  }

  // relax.dynamic_strided_slice: NumPy's slice ``x[b0:e0:s0, ...]`` with the bounds and strides given as 1-D int64 tensors, one entry per axis, known only at run time (TVM's ``dynamic_strided_slice``): bounds out of range clamped as Python's, negative ones counted from the end, negative strides reversing; a zero stride raises ``ValueError``.
  irdl.operation @dynamic_strided_slice {
    %in_x = irdl.base "!builtin.tensor"
    %in_begin = irdl.base "!builtin.tensor"
    %in_end = irdl.base "!builtin.tensor"
    %in_strides = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x, begin: %in_begin, end: %in_end, strides: %in_strides)
    irdl.results(result: %out)
  }

  // relax.matmul: Matrix product with NumPy's semantics: leading (batch) dims broadcast, a 1-D ``x1`` is a row and a 1-D ``x2`` a column whose added dim is dropped.
  irdl.operation @matmul {
    %in_x1 = irdl.base "!builtin.tensor"
    %in_x2 = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_out_dtype = irdl.any
    irdl.operands(x1: %in_x1, x2: %in_x2)
    irdl.results(result: %out)
    irdl.attributes {"out_dtype" = %attr_out_dtype}
  }

  // relax.logical_and: Elementwise logical and (bool), with broadcasting.
  irdl.operation @logical_and {
    %in_x1 = irdl.base "!builtin.tensor"
    %in_x2 = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x1: %in_x1, x2: %in_x2)
    irdl.results(result: %out)
  }

  // relax.logical_or: Elementwise logical or (bool), with broadcasting.
  irdl.operation @logical_or {
    %in_x1 = irdl.base "!builtin.tensor"
    %in_x2 = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x1: %in_x1, x2: %in_x2)
    irdl.results(result: %out)
  }

  // relax.logical_xor: Elementwise logical xor (bool), with broadcasting.
  irdl.operation @logical_xor {
    %in_x1 = irdl.base "!builtin.tensor"
    %in_x2 = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x1: %in_x1, x2: %in_x2)
    irdl.results(result: %out)
  }

  // relax.bitwise_and: Elementwise bitwise and (an integer or bool dtype), with broadcasting.
  irdl.operation @bitwise_and {
    %in_x1 = irdl.base "!builtin.tensor"
    %in_x2 = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x1: %in_x1, x2: %in_x2)
    irdl.results(result: %out)
  }

  // relax.bitwise_or: Elementwise bitwise or (an integer or bool dtype), with broadcasting.
  irdl.operation @bitwise_or {
    %in_x1 = irdl.base "!builtin.tensor"
    %in_x2 = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x1: %in_x1, x2: %in_x2)
    irdl.results(result: %out)
  }

  // relax.bitwise_xor: Elementwise bitwise xor (an integer or bool dtype), with broadcasting.
  irdl.operation @bitwise_xor {
    %in_x1 = irdl.base "!builtin.tensor"
    %in_x2 = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x1: %in_x1, x2: %in_x2)
    irdl.results(result: %out)
  }

  // relax.logical_not: Elementwise logical not of booleans.
  irdl.operation @logical_not {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.bitwise_not: Elementwise bitwise not of integers (``~x``).
  irdl.operation @bitwise_not {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.isnan: Whether each element is NaN (a boolean tensor).
  irdl.operation @isnan {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.isinf: Whether each element is +inf or -inf (a boolean tensor).
  irdl.operation @isinf {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.isfinite: Whether each element is neither inf nor NaN (a boolean tensor).
  irdl.operation @isfinite {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.nn.relu: ``max(x, 0)`` elementwise; integers allowed.
  irdl.operation @nn_relu {
    %in_data = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(data: %in_data)
    irdl.results(result: %out)
  }

  // relax.nn.silu: ``x * sigmoid(x)`` elementwise.
  irdl.operation @nn_silu {
    %in_data = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(data: %in_data)
    irdl.results(result: %out)
  }

  // relax.nn.gelu: GELU, exact erf form: ``0.5 * x * (1 + erf(x / sqrt(2)))``.
  irdl.operation @nn_gelu {
    %in_data = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(data: %in_data)
    irdl.results(result: %out)
  }

  // relax.nn.gelu_tanh: GELU, tanh approximation: ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))``.
  irdl.operation @nn_gelu_tanh {
    %in_data = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(data: %in_data)
    irdl.results(result: %out)
  }

  // relax.nn.leakyrelu: ``x if x >= 0 else alpha * x`` elementwise (float only); its gradient at 0 is 1, as relu's.
  irdl.operation @nn_leakyrelu {
    %in_data = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_alpha = irdl.base "#builtin.float"
    irdl.operands(data: %in_data)
    irdl.results(result: %out)
    irdl.attributes {"alpha" = %attr_alpha}
  }

  // relax.nn.softplus: ``log(1 + exp(beta * x)) / beta``, and ``x`` itself where ``beta * x > threshold`` (TVM's and PyTorch's ``softplus(data, beta=1.0, threshold=20.0)``).
  irdl.operation @nn_softplus {
    %in_data = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_beta = irdl.base "#builtin.float"
    %attr_threshold = irdl.base "#builtin.float"
    irdl.operands(data: %in_data)
    irdl.results(result: %out)
    irdl.attributes {"beta" = %attr_beta, "threshold" = %attr_threshold}
  }

  // relax.nn.softmax: ``exp(x) / sum(exp(x), axis)``, computed stably (the max along ``axis`` is subtracted).
  irdl.operation @nn_softmax {
    %in_data = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_axis = irdl.base "#builtin.integer"
    irdl.operands(data: %in_data)
    irdl.results(result: %out)
    irdl.attributes {"axis" = %attr_axis}
  }

  // relax.nn.log_softmax: ``x - log(sum(exp(x), axis))``, computed stably; the input of ``nll_loss``.
  irdl.operation @nn_log_softmax {
    %in_data = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_axis = irdl.base "#builtin.integer"
    irdl.operands(data: %in_data)
    irdl.results(result: %out)
    irdl.attributes {"axis" = %attr_axis}
  }

  // relax.nn.cross_entropy_with_logits: Scalar ``-sum(x * y) / N`` with ``N = x.shape[0]`` when ``x`` has rank > 1, else ``-sum(x * y)``.
  irdl.operation @nn_cross_entropy_with_logits {
    %in_predictions = irdl.base "!builtin.tensor"
    %in_labels = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(predictions: %in_predictions, labels: %in_labels)
    irdl.results(result: %out)
  }

  // relax.nn.nll_loss: Negative log-likelihood of class-index ``targets`` under log-probabilities ``predictions`` ((N, C, d1..dk) with targets (N, d1..dk), or (C,) with a 0-d target), optional per-class ``weights`` (C,).
  irdl.operation @nn_nll_loss {
    %in_predictions = irdl.base "!builtin.tensor"
    %in_targets = irdl.base "!builtin.tensor"
    %in_weights = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_reduction = irdl.base "#builtin.string"
    %attr_ignore_index = irdl.base "#builtin.integer"
    irdl.operands(predictions: %in_predictions, targets: %in_targets, weights: optional %in_weights)
    irdl.results(result: %out)
    irdl.attributes {"reduction" = %attr_reduction, "ignore_index" = %attr_ignore_index}
  }

  // relax.nn.conv2d: 2-D convolution (cross-correlation).
  irdl.operation @nn_conv2d {
    %in_data = irdl.base "!builtin.tensor"
    %in_weight = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_strides = irdl.base "#builtin.dense_array"
    %attr_padding = irdl.base "#builtin.dense_array"
    %attr_dilation = irdl.base "#builtin.dense_array"
    %attr_groups = irdl.base "#builtin.integer"
    %attr_data_layout = irdl.base "#builtin.string"
    %attr_kernel_layout = irdl.base "#builtin.string"
    %attr_out_layout = irdl.any
    %attr_out_dtype = irdl.any
    irdl.operands(data: %in_data, weight: %in_weight)
    irdl.results(result: %out)
    irdl.attributes {"strides" = %attr_strides, "padding" = %attr_padding, "dilation" = %attr_dilation, "groups" = %attr_groups, "data_layout" = %attr_data_layout, "kernel_layout" = %attr_kernel_layout, "out_layout" = %attr_out_layout, "out_dtype" = %attr_out_dtype}
  }

  // relax.nn.max_pool2d: 2-D max pooling over NCHW or NHWC data (``layout``; ``out_layout`` defaults to it; NHWC is the NCHW pooling between permutations).
  irdl.operation @nn_max_pool2d {
    %in_data = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_pool_size = irdl.base "#builtin.dense_array"
    %attr_strides = irdl.base "#builtin.dense_array"
    %attr_padding = irdl.base "#builtin.dense_array"
    %attr_dilation = irdl.base "#builtin.dense_array"
    %attr_ceil_mode = irdl.base "#builtin.integer"
    %attr_count_include_pad = irdl.base "#builtin.integer"
    %attr_layout = irdl.base "#builtin.string"
    %attr_out_layout = irdl.any
    irdl.operands(data: %in_data)
    irdl.results(result: %out)
    irdl.attributes {"pool_size" = %attr_pool_size, "strides" = %attr_strides, "padding" = %attr_padding, "dilation" = %attr_dilation, "ceil_mode" = %attr_ceil_mode, "count_include_pad" = %attr_count_include_pad, "layout" = %attr_layout, "out_layout" = %attr_out_layout}
  }

  // relax.nn.avg_pool2d: 2-D average pooling over NCHW or NHWC data (``layout``; ``out_layout`` defaults to it; NHWC is the NCHW pooling between permutations).
  irdl.operation @nn_avg_pool2d {
    %in_data = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_pool_size = irdl.base "#builtin.dense_array"
    %attr_strides = irdl.base "#builtin.dense_array"
    %attr_padding = irdl.base "#builtin.dense_array"
    %attr_dilation = irdl.base "#builtin.dense_array"
    %attr_ceil_mode = irdl.base "#builtin.integer"
    %attr_count_include_pad = irdl.base "#builtin.integer"
    %attr_layout = irdl.base "#builtin.string"
    %attr_out_layout = irdl.any
    irdl.operands(data: %in_data)
    irdl.results(result: %out)
    irdl.attributes {"pool_size" = %attr_pool_size, "strides" = %attr_strides, "padding" = %attr_padding, "dilation" = %attr_dilation, "ceil_mode" = %attr_ceil_mode, "count_include_pad" = %attr_count_include_pad, "layout" = %attr_layout, "out_layout" = %attr_out_layout}
  }

  // relax.nn.conv2d_transpose: Transposed 2-D convolution, NCHW data and IOHW weight ``(in_channels, out_channels / groups, kh, kw)``: each input element scatters ``data[n, c, y, x] * weight[c, o, i, j]`` to output row ``y * stride + i * dilation - pad_top`` (columns alike), the adjoint of ``conv2d`` with the same attributes.
  irdl.operation @nn_conv2d_transpose {
    %in_data = irdl.base "!builtin.tensor"
    %in_weight = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_strides = irdl.base "#builtin.dense_array"
    %attr_padding = irdl.base "#builtin.dense_array"
    %attr_output_padding = irdl.base "#builtin.dense_array"
    %attr_dilation = irdl.base "#builtin.dense_array"
    %attr_groups = irdl.base "#builtin.integer"
    %attr_data_layout = irdl.base "#builtin.string"
    %attr_kernel_layout = irdl.base "#builtin.string"
    %attr_out_layout = irdl.any
    %attr_out_dtype = irdl.any
    irdl.operands(data: %in_data, weight: %in_weight)
    irdl.results(result: %out)
    irdl.attributes {"strides" = %attr_strides, "padding" = %attr_padding, "output_padding" = %attr_output_padding, "dilation" = %attr_dilation, "groups" = %attr_groups, "data_layout" = %attr_data_layout, "kernel_layout" = %attr_kernel_layout, "out_layout" = %attr_out_layout, "out_dtype" = %attr_out_dtype}
  }

  // relax.random.uniform: Uniform random numbers in ``[0, 1)`` of ``shape`` and float ``dtype``, a pure function of ``key`` (an int64 0-d tensor) and each element's flat index: ``(bits(key, i) >> (64 - p)) * 2**-p`` with ``bits(key, i) = mix64(mix64(key) + (i + 1) * 0x9E3779B97F4A7C15)`` (SplitMix64) and ``p`` the dtype's significand bits (24 for float32); see the module docstring.
  irdl.operation @random_uniform {
    %in_key = irdl.base "!builtin.tensor"
    %index = irdl.is index
    %out = irdl.base "!builtin.tensor"
    %attr_shape = irdl.base "#builtin.dense_array"
    %attr_dtype = irdl.base "#builtin.type"
    irdl.operands(key: %in_key, dims: variadic %index)
    irdl.results(result: %out)
    irdl.attributes {"shape" = %attr_shape, "dtype" = %attr_dtype}
  }

  // relax.nn.pad: Pad every axis with ``pad_value`` (TVM's ``nn.pad(data, pad_width, pad_mode='constant', pad_value=0.0)``): ``pad_width`` is ``(before_0, after_0, before_1, after_1, ...)`` (the nested ``((before, after), ...)`` is accepted and stored flat).
  irdl.operation @nn_pad {
    %in_data = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_pad_width = irdl.base "#builtin.dense_array"
    %attr_pad_mode = irdl.base "#builtin.string"
    %attr_pad_value = irdl.any
    irdl.operands(data: %in_data)
    irdl.results(result: %out)
    irdl.attributes {"pad_width" = %attr_pad_width, "pad_mode" = %attr_pad_mode, "pad_value" = %attr_pad_value}
  }

  // relax.sum: Sum over ``axis``; of bool data a bool, true where any element is (TVM's ``any``).
  irdl.operation @sum {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_axis = irdl.any
    %attr_keepdims = irdl.base "#builtin.integer"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
    irdl.attributes {"axis" = %attr_axis, "keepdims" = %attr_keepdims}
  }

  // relax.mean: Arithmetic mean over ``axis`` (float inputs).
  irdl.operation @mean {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_axis = irdl.any
    %attr_keepdims = irdl.base "#builtin.integer"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
    irdl.attributes {"axis" = %attr_axis, "keepdims" = %attr_keepdims}
  }

  // relax.variance: Population variance ``mean((x - mean(x))**2)`` over ``axis`` (float inputs), as TVM.
  irdl.operation @variance {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_axis = irdl.any
    %attr_keepdims = irdl.base "#builtin.integer"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
    irdl.attributes {"axis" = %attr_axis, "keepdims" = %attr_keepdims}
  }

  // relax.max: Maximum over ``axis`` (of bool data: any).
  irdl.operation @max {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_axis = irdl.any
    %attr_keepdims = irdl.base "#builtin.integer"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
    irdl.attributes {"axis" = %attr_axis, "keepdims" = %attr_keepdims}
  }

  // relax.min: Minimum over ``axis`` (of bool data: all).
  irdl.operation @min {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_axis = irdl.any
    %attr_keepdims = irdl.base "#builtin.integer"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
    irdl.attributes {"axis" = %attr_axis, "keepdims" = %attr_keepdims}
  }

  // relax.prod: Product over ``axis`` (of bool data: a bool, true where all elements are, as TVM's).
  irdl.operation @prod {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_axis = irdl.any
    %attr_keepdims = irdl.base "#builtin.integer"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
    irdl.attributes {"axis" = %attr_axis, "keepdims" = %attr_keepdims}
  }

  // relax.argmax: Index (int64) of the first maximum along ``axis`` (``None``: of the flattened tensor).
  irdl.operation @argmax {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_axis = irdl.any
    %attr_keepdims = irdl.base "#builtin.integer"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
    irdl.attributes {"axis" = %attr_axis, "keepdims" = %attr_keepdims}
  }

  // relax.argmin: Index (int64) of the first minimum along ``axis`` (``None``: of the flattened tensor).
  irdl.operation @argmin {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_axis = irdl.any
    %attr_keepdims = irdl.base "#builtin.integer"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
    irdl.attributes {"axis" = %attr_axis, "keepdims" = %attr_keepdims}
  }

  // relax.cumsum: Running sum along ``axis`` (``None``: of the flattened tensor, as TVM), in ``dtype`` (default the input's; the input is cast first).
  irdl.operation @cumsum {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_axis = irdl.any
    %attr_dtype = irdl.any
    %attr_exclusive = irdl.base "#builtin.integer"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
    irdl.attributes {"axis" = %attr_axis, "dtype" = %attr_dtype, "exclusive" = %attr_exclusive}
  }

  // relax.collapse_sum_to: Sum ``x`` down to ``shape``, which must broadcast to ``x``'s shape: the adjoint of broadcasting, used by gradients of broadcasting ops.
  irdl.operation @collapse_sum_to {
    %in_x = irdl.base "!builtin.tensor"
    %index = irdl.is index
    %out = irdl.base "!builtin.tensor"
    %attr_shape = irdl.base "#builtin.dense_array"
    irdl.operands(x: %in_x, dims: variadic %index)
    irdl.results(result: %out)
    irdl.attributes {"shape" = %attr_shape}
  }

  // relax.cumprod: Running product along ``axis`` (TVM's ``cumprod(data, axis=None, dtype=None, exclusive=False)``: ``None`` scans the flattened tensor), in ``dtype`` (default the input's; the input is cast first).
  irdl.operation @cumprod {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_axis = irdl.any
    %attr_dtype = irdl.any
    %attr_exclusive = irdl.base "#builtin.integer"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
    irdl.attributes {"axis" = %attr_axis, "dtype" = %attr_dtype, "exclusive" = %attr_exclusive}
  }

  // relax.gather_elements: ``out[i][j] = data[indices[i][j]][j]`` for ``axis=0`` (ONNX's GatherElements, TVM's ``gather_elements``): the output has the indices' shape.
  irdl.operation @gather_elements {
    %in_data = irdl.base "!builtin.tensor"
    %in_indices = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_axis = irdl.base "#builtin.integer"
    %attr_negative_indices = irdl.base "#builtin.integer"
    irdl.operands(data: %in_data, indices: %in_indices)
    irdl.results(result: %out)
    irdl.attributes {"axis" = %attr_axis, "negative_indices" = %attr_negative_indices}
  }

  // relax.scatter_elements: A copy of ``data`` with ``updates`` written at ``indices`` along ``axis`` (ONNX's ScatterElements, TVM's ``scatter_elements``): ``out[indices[i][j]][j] = updates[i][j]`` for ``axis=0``, in row-major order (the last write wins), or combined by ``reduction`` 'add', 'mul', 'min', 'max', or 'mean' (float data: TVM's kernel's running mean, each write in that order ``(old + update) / 2``, so data 0 with updates 3 then 6 at one place is 3.75, not PyTorch's ``scatter_reduce`` mean).
  irdl.operation @scatter_elements {
    %in_data = irdl.base "!builtin.tensor"
    %in_indices = irdl.base "!builtin.tensor"
    %in_updates = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_axis = irdl.base "#builtin.integer"
    %attr_reduction = irdl.base "#builtin.string"
    irdl.operands(data: %in_data, indices: %in_indices, updates: %in_updates)
    irdl.results(result: %out)
    irdl.attributes {"axis" = %attr_axis, "reduction" = %attr_reduction}
  }

  // relax.one_hot: One-hot vectors (TVM's ``one_hot(indices, on_value, off_value, depth, axis=-1)``; the values may be ``R.prim_value``s or numbers, ``dtype`` defaults to theirs): a new axis of size ``depth`` at ``axis`` holding ``on_value`` at each index and ``off_value`` elsewhere.
  irdl.operation @one_hot {
    %in_indices = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_on_value = irdl.any
    %attr_off_value = irdl.any
    %attr_depth = irdl.base "#builtin.integer"
    %attr_axis = irdl.base "#builtin.integer"
    %attr_dtype = irdl.any
    irdl.operands(indices: %in_indices)
    irdl.results(result: %out)
    irdl.attributes {"on_value" = %attr_on_value, "off_value" = %attr_off_value, "depth" = %attr_depth, "axis" = %attr_axis, "dtype" = %attr_dtype}
  }

  // relax.scatter_nd: A copy of ``data`` with ``updates`` written at the index tuples of ``indices`` (TVM's ``scatter_nd``, ONNX's ScatterND): the last axis of ``indices`` (static, ``K <= data.ndim``) holds an index into the first ``K`` axes of ``data``, and ``updates`` has the shape ``indices.shape[:-1] + data.shape[K:]``; ``out[indices[p]] = updates[p]`` for each position ``p`` in row-major order (the last write wins), or combined by ``reduction`` 'add', 'mul', 'min' or 'max'.
  irdl.operation @scatter_nd {
    %in_data = irdl.base "!builtin.tensor"
    %in_indices = irdl.base "!builtin.tensor"
    %in_updates = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_reduction = irdl.base "#builtin.string"
    irdl.operands(data: %in_data, indices: %in_indices, updates: %in_updates)
    irdl.results(result: %out)
    irdl.attributes {"reduction" = %attr_reduction}
  }

  // relax.argsort: The indices that sort ``data`` along ``axis`` (TVM's ``argsort(data, axis=-1, descending=False, dtype='int32')``), stably.
  irdl.operation @argsort {
    %in_data = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_axis = irdl.base "#builtin.integer"
    %attr_descending = irdl.base "#builtin.integer"
    %attr_dtype = irdl.base "#builtin.type"
    irdl.operands(data: %in_data)
    irdl.results(result: %out)
    irdl.attributes {"axis" = %attr_axis, "descending" = %attr_descending, "dtype" = %attr_dtype}
  }

  // relax.split: Split along ``axis`` into ``indices_or_sections`` sections (an int: as TVM, pieces of ``ceil(size / sections)``, the last one what is left, 10 in 3 is 4, 4, 2) or at the indices given (a tuple: each bound clamped into ``[0, size]``, a piece ending before its start empty, as TVM infers them: a negative index is 0); returns a tuple of tensors, or the data itself for one section or no index (TVM's struct info).
  irdl.operation @split {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_indices_or_sections = irdl.any
    %attr_axis = irdl.base "#builtin.integer"
    irdl.operands(x: %in_x)
    irdl.results(results: variadic %out)
    irdl.attributes {"indices_or_sections" = %attr_indices_or_sections, "axis" = %attr_axis}
  }

  // relax.einsum: Einstein summation over a tuple of operands (TVM's ``R.einsum((a, b), subscripts)``, NumPy's semantics): explicit ``'ij,jk->ik'`` or implicit ``'ij,jk'`` subscripts, repeated labels (diagonals, traces) and ``...`` for shared leading dims; a size-1 dim broadcasts.
  irdl.operation @einsum {
    %in_operands = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_subscripts = irdl.base "#builtin.string"
    irdl.operands(operands: variadic %in_operands)
    irdl.results(result: %out)
    irdl.attributes {"subscripts" = %attr_subscripts}
  }

  // relax.ewise_fma: ``x1 * x2 + x3`` elementwise (TVM's ``ewise_fma``): three operands of one dtype and one shape, no broadcasting.
  irdl.operation @ewise_fma {
    %in_x1 = irdl.base "!builtin.tensor"
    %in_x2 = irdl.base "!builtin.tensor"
    %in_x3 = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x1: %in_x1, x2: %in_x2, x3: %in_x3)
    irdl.results(result: %out)
  }

  // relax.flip: Reverse the order of the elements along ``axis`` (TVM's ``flip(data, axis)``), on an axis of any size.
  irdl.operation @flip {
    %in_data = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_axis = irdl.base "#builtin.integer"
    irdl.operands(data: %in_data)
    irdl.results(result: %out)
    irdl.attributes {"axis" = %attr_axis}
  }

  // relax.grad.start_checkpoint: Marks the input of a checkpointed segment (identity).
  irdl.operation @grad_start_checkpoint {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.grad.end_checkpoint: Marks the output of a checkpointed segment (identity).
  irdl.operation @grad_end_checkpoint {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.grad.no_grad: Identity whose gradient is zero: gradients do not flow through it.
  irdl.operation @grad_no_grad {
    %in_x = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(x: %in_x)
    irdl.results(result: %out)
  }

  // relax.grad.take_backward: The adjoint of ``take(x, indices, axis)`` for ``x`` of shape ``shape``: zeros of that shape with each slice of ``output_grad`` added at its index (repeated indices accumulate); ``mode`` as take's: an index ``fast`` does not allow raises ``IndexError``.
  irdl.operation @grad_take_backward {
    %in_output_grad = irdl.base "!builtin.tensor"
    %in_indices = irdl.base "!builtin.tensor"
    %index = irdl.is index
    %out = irdl.base "!builtin.tensor"
    %attr_axis = irdl.any
    %attr_shape = irdl.base "#builtin.dense_array"
    %attr_mode = irdl.base "#builtin.string"
    irdl.operands(output_grad: %in_output_grad, indices: %in_indices, dims: variadic %index)
    irdl.results(result: %out)
    irdl.attributes {"axis" = %attr_axis, "shape" = %attr_shape, "mode" = %attr_mode}
  }

  // relax.grad.strided_slice_backward: The adjoint of ``strided_slice(x, axes, begin, end, strides)`` for ``x`` of shape ``shape``: zeros of that shape with ``output_grad`` written into the sliced positions.
  irdl.operation @grad_strided_slice_backward {
    %in_output_grad = irdl.base "!builtin.tensor"
    %index = irdl.is index
    %out = irdl.base "!builtin.tensor"
    %attr_axes = irdl.base "#builtin.dense_array"
    %attr_begin = irdl.base "#builtin.dense_array"
    %attr_end = irdl.base "#builtin.dense_array"
    %attr_strides = irdl.any
    %attr_shape = irdl.base "#builtin.dense_array"
    irdl.operands(output_grad: %in_output_grad, dims: variadic %index)
    irdl.results(result: %out)
    irdl.attributes {"axes" = %attr_axes, "begin" = %attr_begin, "end" = %attr_end, "strides" = %attr_strides, "shape" = %attr_shape}
  }

  // relax.grad.nll_loss_backward: The gradient of ``relax.nn.nll_loss`` with respect to ``predictions`` (same attributes): zero except ``grad[n, t, i...] = -g * weights[t]`` at each non-ignored target ``t = targets[n, i...]``, where ``g`` is ``output_grad[n, i...]`` (``'none'``), ``output_grad`` (``'sum'``) or ``output_grad`` divided by the sum of the non-ignored targets' weights (``'mean'``; NaN everywhere if all are ignored, as the loss).
  irdl.operation @grad_nll_loss_backward {
    %in_output_grad = irdl.base "!builtin.tensor"
    %in_predictions = irdl.base "!builtin.tensor"
    %in_targets = irdl.base "!builtin.tensor"
    %in_weights = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_reduction = irdl.base "#builtin.string"
    %attr_ignore_index = irdl.base "#builtin.integer"
    irdl.operands(output_grad: %in_output_grad, predictions: %in_predictions, targets: %in_targets, weights: optional %in_weights)
    irdl.results(result: %out)
    irdl.attributes {"reduction" = %attr_reduction, "ignore_index" = %attr_ignore_index}
  }

  // relax.grad.max_pool2d_backward: The gradient of ``relax.nn.max_pool2d`` with respect to ``data`` (same attributes; ``output_grad`` has the pooled shape): each window's output gradient goes to the position of its maximum; on ties, to the first maximum in row-major window order (as ``argmax``).
  irdl.operation @grad_max_pool2d_backward {
    %in_output_grad = irdl.base "!builtin.tensor"
    %in_data = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_pool_size = irdl.base "#builtin.dense_array"
    %attr_strides = irdl.base "#builtin.dense_array"
    %attr_padding = irdl.base "#builtin.dense_array"
    %attr_dilation = irdl.base "#builtin.dense_array"
    %attr_ceil_mode = irdl.base "#builtin.integer"
    %attr_count_include_pad = irdl.base "#builtin.integer"
    %attr_layout = irdl.base "#builtin.string"
    %attr_out_layout = irdl.any
    irdl.operands(output_grad: %in_output_grad, data: %in_data)
    irdl.results(result: %out)
    irdl.attributes {"pool_size" = %attr_pool_size, "strides" = %attr_strides, "padding" = %attr_padding, "dilation" = %attr_dilation, "ceil_mode" = %attr_ceil_mode, "count_include_pad" = %attr_count_include_pad, "layout" = %attr_layout, "out_layout" = %attr_out_layout}
  }

  // relax.grad.avg_pool2d_backward: The gradient of ``relax.nn.avg_pool2d`` with respect to ``data`` (same attributes; ``output_grad`` has the pooled shape): each window's output gradient, divided by the window's divisor (the forward's), goes to every input position of the window; padding positions take none.
  irdl.operation @grad_avg_pool2d_backward {
    %in_output_grad = irdl.base "!builtin.tensor"
    %in_data = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    %attr_pool_size = irdl.base "#builtin.dense_array"
    %attr_strides = irdl.base "#builtin.dense_array"
    %attr_padding = irdl.base "#builtin.dense_array"
    %attr_dilation = irdl.base "#builtin.dense_array"
    %attr_ceil_mode = irdl.base "#builtin.integer"
    %attr_count_include_pad = irdl.base "#builtin.integer"
    %attr_layout = irdl.base "#builtin.string"
    %attr_out_layout = irdl.any
    irdl.operands(output_grad: %in_output_grad, data: %in_data)
    irdl.results(result: %out)
    irdl.attributes {"pool_size" = %attr_pool_size, "strides" = %attr_strides, "padding" = %attr_padding, "dilation" = %attr_dilation, "ceil_mode" = %attr_ceil_mode, "count_include_pad" = %attr_count_include_pad, "layout" = %attr_layout, "out_layout" = %attr_out_layout}
  }
}
